package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/attempt"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
)

// An attempt's file events go out together, each stored once: published
// again (the same phase of the same claim), none is stored twice; and with
// the server gone mid-batch, EmitAll waits for it and loses none.
func TestEmitAllStoresEachEventOnce(t *testing.T) {
	dir := t.TempDir()
	ns := natstest.RunServer(t, dir, -1)
	port := natstest.Port(t, ns)
	// Reconnecting for good, soon after the server is back.
	_, js := natstest.Connect(t, ns, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &queue.Job{Attempt: drovertype.AttemptID("f", "t", 1), Flow: "f", Task: "t", N: 1}
	em := &emitter{js: js, job: job, epoch: 1, now: time.Now, red: redact.New(), m: newWorkerMetrics()}
	files := func(from, to int) []attempt.Keyed {
		var ks []attempt.Keyed
		for i := from; i < to; i++ {
			p := fmt.Sprintf("src/f%03d.go", i)
			ks = append(ks, attempt.Keyed{Key: p, Data: event.FileModifiedData{Path: p, Change: "modified"}})
		}
		return ks
	}
	if err := em.EmitAll(ctx, event.FileModified, files(0, 300)); err != nil {
		t.Fatal(err)
	}
	if err := em.EmitAll(ctx, event.FileModified, files(0, 300)); err != nil {
		t.Fatal(err)
	}
	paths := storedFileEvents(t, js, 300)
	for i, p := range paths {
		if want := fmt.Sprintf("src/f%03d.go", i); p != want {
			t.Fatalf("event %d is %s, want %s (in the order given)", i, p, want)
		}
	}

	natstest.StopServer(ns)
	done := make(chan error, 1)
	go func() { done <- em.EmitAll(ctx, event.FileModified, files(300, 400)) }()
	select {
	case err := <-done:
		t.Fatalf("EmitAll returned %v with the server down", err)
	case <-time.After(500 * time.Millisecond):
	}
	natstest.RunServer(t, dir, port)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("EmitAll did not return once the server was back")
	}
	if got := storedFileEvents(t, js, 400); len(got) != 400 {
		t.Fatalf("%d file events stored, want 400", len(got))
	}
}

// storedFileEvents reads the file events of the EVENTS stream, failing the
// test if any path is there twice, once want are there or 10 s have passed.
func storedFileEvents(t *testing.T, js jetstream.JetStream, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	seen := map[string]bool{}
	for len(paths) < want && ctx.Err() == nil {
		batch, err := cons.Fetch(want, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			ev, err := event.Decode(msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			var d event.FileModifiedData
			if ev.Type != event.FileModified || ev.Payload(&d) != nil {
				continue
			}
			if seen[d.Path] {
				t.Fatalf("%s stored twice", d.Path)
			}
			seen[d.Path] = true
			paths = append(paths, d.Path)
		}
	}
	return paths
}
