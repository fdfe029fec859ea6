package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
)

// TestEventReaderOrder: events decoded by several goroutines reach the fold
// in the stream's order, however long each takes to decode (reports of
// 200 KB among events of a few bytes, junk among them); a stop, at the end
// or in the middle, comes after every event read before it, and then the
// reader ends and leaves no goroutine behind.
func TestEventReaderOrder(t *testing.T) {
	js := eventsStream(t)
	ctx := context.Background()
	const n = 3000
	r := rand.New(rand.NewPCG(3, 4))
	subject := event.Subject("f-1", event.AttemptReported)
	for i := range n {
		var body string
		switch r.IntN(10) {
		case 0:
			body = "junk" // poison: decoded at once
		case 1, 2:
			body = fmt.Sprintf(`{"v":1,"id":"attempt_reported:%d","type":"attempt_reported","flow":"f-1","data":{"stdout_tail":%q}}`, i, strings.Repeat("x", 50_000+r.IntN(150_000)))
		default:
			body = fmt.Sprintf(`{"v":1,"id":"attempt_reported:%d","type":"attempt_reported","flow":"f-1"}`, i)
		}
		if _, err := js.PublishAsync(subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing timed out")
	}
	open := func(from uint64) jetstream.MessagesContext {
		cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		})
		if err != nil {
			t.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1024))
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	// Read everything, then stop.
	it := open(1)
	events := readEvents(it)
	for want := uint64(1); want <= n; want++ {
		m, ok := events.Next()
		if !ok || m.err != nil || m.md == nil {
			t.Fatalf("event %d: ok %v, err %v", want, ok, m.err)
		}
		if got := m.md.Sequence.Stream; got != want {
			t.Fatalf("got sequence %d, want %d", got, want)
		}
	}
	it.Stop()
	if m, ok := events.Next(); !ok || m.err == nil {
		t.Fatalf("after the stop: ok %v, err %v; want the stop's error", ok, m.err)
	}
	if _, ok := events.Next(); ok {
		t.Fatal("the reader went on after its error")
	}

	// Stop after 100 events, while the rest are being read and decoded:
	// those read before the stop still come in order, then its error.
	it = open(500)
	events = readEvents(it)
	want := uint64(500)
	for range 100 {
		m, _ := events.Next()
		if m.md == nil || m.md.Sequence.Stream != want {
			t.Fatalf("want sequence %d, got %+v", want, m.md)
		}
		want++
	}
	it.Stop()
	for {
		m, ok := events.Next()
		if !ok {
			t.Fatal("the reader ended without its error")
		}
		if m.err != nil {
			break
		}
		if m.md.Sequence.Stream != want {
			t.Fatalf("after the stop: sequence %d, want %d", m.md.Sequence.Stream, want)
		}
		want++
	}
	if _, ok := events.Next(); ok {
		t.Fatal("the reader went on after its error")
	}
	waitReaderGone(t)
}

// eventsStream starts a nats-server with the EVENTS stream.
func eventsStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	ns := natstest.RunServer(t, t.TempDir(), -1)
	_, js := natstest.Connect(t, ns)
	if err := queue.Ensure(context.Background(), js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return js
}

// waitReaderGone waits until the reader's goroutines have ended: the
// package's TestMain finds any goroutine left at the end, these must be
// gone already.
func waitReaderGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "controller.readEvents") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader's goroutines are still running:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventReaderBytesAhead: a fold that takes no event (it is committing,
// or stuck) holds the reader at aheadBytes of messages read ahead, however
// many events decodeAhead allows, and each event still comes, in order,
// once the fold takes them again.
func TestEventReaderBytesAhead(t *testing.T) {
	js := eventsStream(t)
	ctx := context.Background()
	const size = 512 << 10
	n := aheadBytes/size + 16 // more than the bytes allow, fewer than decodeAhead
	subject := event.Subject("f-1", event.AttemptReported)
	for i := range n {
		body := fmt.Sprintf("%d:%s", i, strings.Repeat("x", size)) // poison, as big as it gets in practice
		if _, err := js.PublishAsync(subject, []byte(body[:size])); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing timed out")
	}
	// open reads the stream until the reader waits for bytes (or, without
	// a bound, until it has read everything), and checks that it holds
	// aheadBytes and the message it waits to hand on.
	open := func() *eventReader {
		cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1024))
		if err != nil {
			t.Fatal(err)
		}
		counted := &countedMessages{MessagesContext: it}
		events := readEvents(counted)
		deadline := time.Now().Add(10 * time.Second)
		for events.ahead.waits.Load() == 0 && counted.read.Load() < int64(n) {
			if time.Now().After(deadline) {
				t.Fatalf("the reader neither waited nor read everything: %d of %d read", counted.read.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if read, most := counted.read.Load(), int64(aheadBytes/size+1); read > most {
			t.Fatalf("the reader read %d messages of %d KiB ahead of the fold; at most %d fit in %d MiB", read, size>>10, most, aheadBytes>>20)
		}
		return events
	}

	// Stopped while it waits: it ends, and gives every byte back.
	events := open()
	events.Stop()
	if free := events.ahead.free.Load(); free != aheadBytes {
		t.Errorf("after the stop %d bytes of the budget are free, want all %d", free, aheadBytes)
	}
	waitReaderGone(t)

	// Taken again: every event comes, in order.
	events = open()
	for want := uint64(1); want <= uint64(n); want++ {
		m, ok := events.Next()
		if !ok || m.err != nil || m.md == nil {
			t.Fatalf("event %d: ok %v, err %v", want, ok, m.err)
		}
		if got := m.md.Sequence.Stream; got != want || len(m.msg.Data()) != size {
			t.Fatalf("got sequence %d of %d bytes, want %d of %d", got, len(m.msg.Data()), want, size)
		}
	}
	events.Stop()
	if free := events.ahead.free.Load(); free != aheadBytes {
		t.Errorf("after the stop %d bytes of the budget are free, want all %d", free, aheadBytes)
	}
	waitReaderGone(t)
}

// countedMessages counts the messages read from a consumer.
type countedMessages struct {
	jetstream.MessagesContext
	read atomic.Int64
}

func (c *countedMessages) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	m, err := c.MessagesContext.Next(opts...)
	if err == nil {
		c.read.Add(1)
	}
	return m, err
}
