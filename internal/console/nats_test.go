package console

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/objstore"
	"github.com/drover-dev/drover/internal/queue"
)

// TestNATSSources reads through the JetStream sources from a real
// nats-server: output chunks in order, events by sequence, artifacts,
// registrations with fields this build does not know, dead letters.
func TestNATSSources(t *testing.T) {
	ns := natstest.RunServer(t, t.TempDir(), -1)
	_, js := natstest.Connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	n := NewNATS(js)
	flowID, a := "f-abc123", drovertype.AttemptID("f-abc123", "t", 1)

	// Output: chunks of this attempt only, in order, then live ones.
	publishChunk := func(attempt, text string, i int) {
		ev, _ := event.New(drovertype.EventID(event.RuntimeOutputChunk, attempt+":"+string(rune('a'+i))), event.RuntimeOutputChunk,
			time.Now(), flowID, "t", attempt, 1, event.OutputChunkData{Stream: "stdout", Text: text})
		b, _ := ev.Encode()
		if _, err := js.Publish(ctx, queue.OutputSubject(flowID, attempt), b); err != nil {
			t.Fatal(err)
		}
	}
	publishChunk(a, "one ", 0)
	publishChunk(drovertype.AttemptID(flowID, "t", 2), "other attempt", 1)
	publishChunk(a, "two ", 2)
	if _, err := js.Publish(ctx, queue.OutputSubject(flowID, a), []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	out, err := n.Output(ctx, flowID, a)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Stop()
	c1, p1, err := out.Next()
	c2, p2, err2 := out.Next()
	if err != nil || err2 != nil || c1.Text != "one " || c2.Text != "two " || p1 != 2 || p2 != 1 {
		t.Fatalf("chunks %q (%d) %q (%d), %v %v", c1.Text, p1, c2.Text, p2, err, err2)
	}
	publishChunk(a, "three", 3)
	if c3, _, err := out.Next(); err != nil || c3.Text != "three" {
		t.Fatalf("live chunk %q %v", c3.Text, err)
	}
	done := make(chan error)
	go func() { _, _, err := out.Next(); done <- err }()
	out.Stop()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Next after Stop returned a chunk")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end a blocked Next")
	}

	// Events by sequence; a sequence past the end is left out.
	ev, _ := event.New(drovertype.EventID(event.FlowPaused, "x"), event.FlowPaused, time.Now(), flowID, "", "", 0, event.OperatorData{Reason: "r"})
	seq, err := queue.PublishEvent(ctx, js, ev)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := n.Events(ctx, []uint64{seq, seq + 100})
	if err != nil || len(evs) != 1 || evs[0].Seq != seq || evs[0].Event.ID != ev.ID {
		t.Fatalf("events %+v %v", evs, err)
	}

	// Artifacts.
	if _, err := objstore.NewArtifacts(js).Put(ctx, "log-1", strings.NewReader("the log")); err != nil {
		t.Fatal(err)
	}
	rc, err := n.Object(ctx, "log-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "the log" {
		t.Fatalf("object %q", b)
	}

	// Registrations keep what newer workers add; a change is noticed.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	changed, err := n.WatchWorkers(wctx)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "w1", []byte(`{"id":"w1","host":"h","slots":2,"sandbox":"landlock ABI 7","quota_left":3,"runtimes":[{"name":"demo","healthy":true}]}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice of a registration")
	}
	ws, err := n.Workers(ctx)
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers %v %v", ws, err)
	}
	if extra := extraFields(ws[0].Raw, knownFields); extra != `quota_left: 3` {
		t.Fatalf("extra fields %q", extra)
	}

	// Dead letters: those parked before, then those parked while watching.
	if err := queue.PublishDeadLetter(ctx, js, "events", "bad one", []byte("{x")); err != nil {
		t.Fatal(err)
	}
	dls, err := n.DeadLetters(ctx, 10)
	if err != nil || len(dls) != 1 || dls[0].Reason != "bad one" || dls[0].Source != "events" {
		t.Fatalf("dead letters %+v %v", dls, err)
	}
	watch, err := n.WatchDeadLetters(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.PublishDeadLetter(ctx, js, "attempts", "bad two", []byte("{y")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-watch:
		if d.Reason != "bad two" || d.Source != "attempts" || string(d.Data) != "{y" {
			t.Fatalf("watched %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter watched")
	}
	wcancel()
	for range watch { // closed once the watch ends
	}
}
