package worker

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/supervise"
)

// output streams a CLI's output as runtime_output_chunk events on the OUTPUT
// stream. It is best effort by design: the report keeps the bounded head and
// tail whatever happens here, and when the server falls behind, chunks are
// dropped (and counted) rather than buffered without bound.
type output struct {
	js   jetstream.JetStream
	job  *queue.Job
	red  *redact.Redactor
	mu   sync.Mutex
	buf  map[supervise.Stream][]byte
	off  map[supervise.Stream]int64
	seq  int
	drop int64

	stop chan struct{}
	done chan struct{}
}

const (
	chunkSize     = 16 << 10
	flushInterval = 200 * time.Millisecond
	maxInFlight   = 256
)

func newOutput(js jetstream.JetStream, job *queue.Job, red *redact.Redactor) *output {
	o := &output{
		js: js, job: job, red: red,
		buf: map[supervise.Stream][]byte{}, off: map[supervise.Stream]int64{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go o.loop()
	return o
}

func (o *output) loop() {
	defer close(o.done)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			o.flush(0)
			return
		case <-t.C:
			o.flush(o.hold())
		}
	}
}

func (o *output) write(s supervise.Stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Masking the whole buffer catches a secret that arrived in pieces; a
	// secret still arriving can only start in the held-back tail.
	o.buf[s] = o.red.Bytes(append(o.buf[s], p...))
	for len(o.buf[s]) >= chunkSize+o.hold() {
		o.publishLocked(s, o.buf[s][:chunkSize])
		o.buf[s] = append(o.buf[s][:0], o.buf[s][chunkSize:]...)
	}
}

// hold is how many trailing bytes stay buffered until more output or the
// end, so that a secret split across two chunks is still masked whole.
func (o *output) hold() int { return max(o.red.MaxLen()-1, 0) }

// flush publishes what is buffered but the last keep bytes of each stream.
func (o *output) flush(keep int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s, b := range o.buf {
		b = o.red.Bytes(b)
		o.buf[s] = b
		if len(b) > keep {
			o.publishLocked(s, b[:len(b)-keep])
			o.buf[s] = append(b[:0], b[len(b)-keep:]...)
		}
	}
}

func (o *output) publishLocked(s supervise.Stream, p []byte) {
	off := o.off[s]
	o.off[s] += int64(len(p))
	if o.js.PublishAsyncPending() > maxInFlight {
		o.drop += int64(len(p))
		return
	}
	o.seq++
	ev := event.Event{
		V: event.Version, ID: drovertype.EventID(event.RuntimeOutputChunk, fmt.Sprintf("%s:%d", o.job.Attempt, o.seq)),
		Type: event.RuntimeOutputChunk, Time: time.Now().UTC(), Flow: o.job.Flow, Task: o.job.Task, Attempt: o.job.Attempt,
	}
	ev.Data, _ = json.Marshal(event.OutputChunkData{Stream: s.String(), Offset: off, Text: string(p)})
	data, _ := json.Marshal(ev)
	_, _ = o.js.PublishAsync(queue.OutputSubject(o.job.Flow, o.job.Attempt), data)
}

// close flushes what is left and stops the flusher.
func (o *output) close() {
	close(o.stop)
	<-o.done
}
