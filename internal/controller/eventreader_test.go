package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
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
	ns := natstest.RunServer(t, t.TempDir(), -1)
	_, js := natstest.Connect(t, ns)
	ctx := context.Background()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
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
	// The package's TestMain finds any goroutine left at the end; these
	// must be gone now.
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "controller.readEvents") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader's goroutines are still running:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
