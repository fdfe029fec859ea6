package queue

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/natstest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
)

// signalHandler is a slog handler that reports each record's message, so the
// test can wait on Connect's own reconnect log instead of polling.
type signalHandler struct{ msgs chan<- string }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

func waitLog(t *testing.T, msgs <-chan string, want string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-msgs:
			if m == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q log within 15s", want)
		}
	}
}

func TestServerRestartKeepsEverythingAndClientReconnects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := natstest.RunServer(t, dir, -1)
	port := natstest.Port(t, ns)

	msgs := make(chan string, 64)
	nc, err := natsconn.Connect(natsconn.ClientOptions{URL: ns.ClientURL(), Name: "restart-test", Reconnect: true, Logger: slog.New(signalHandler{msgs})})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatal(err)
	}

	var events []*event.Event
	for i, typ := range []event.Type{event.FlowSubmitted, event.AttemptScheduled, event.AttemptClaimed} {
		ev := newEvent(t, "ev-"+string(rune('a'+i)), typ, "f1")
		if _, err := PublishEvent(ctx, js, ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	jobs := []*Job{newJob("f1", "t1", 1, "default", "claude"), newJob("f1", "t2", 1, "default", "claude")}
	for _, j := range jobs {
		publishJob(t, js, j)
	}
	claims := claimsFor(t, js, nil)
	lease := acquire(t, claims, jobs[0].Attempt, "w1", 1)

	natstest.StopServer(ns)

	ns2 := natstest.RunServer(t, dir, port)
	waitLog(t, msgs, "nats reconnected")
	if got := nc.ConnectedUrl(); got != ns2.ClientURL() {
		t.Errorf("reconnected to %s, want %s", got, ns2.ClientURL())
	}
	if nc.Status() != nats.CONNECTED {
		t.Fatalf("status %v after reconnect", nc.Status())
	}

	// Every acknowledged event is there, in order.
	if n := streamMsgs(t, js, EventsStream); n != uint64(len(events)) {
		t.Fatalf("%d events after restart, want %d", n, len(events))
	}
	for i, ev := range events {
		back, err := event.Decode(getMsg(t, js, EventsStream, uint64(i+1)).Data)
		if err != nil || back.ID != ev.ID {
			t.Fatalf("event %d after restart: %+v, %v; want %s", i+1, back, err, ev.ID)
		}
	}
	// The dedup window survived too: a republished event is still dropped.
	if seq, err := PublishEvent(ctx, js, events[1]); err != nil || seq != 2 {
		t.Errorf("republish after restart: seq %d err %v, want the original 2", seq, err)
	}
	// Publishing works again.
	if seq, err := PublishEvent(ctx, js, newEvent(t, "ev-new", event.AttemptReported, "f1")); err != nil || seq != 4 {
		t.Errorf("publish after restart: seq %d err %v, want 4", seq, err)
	}

	// Every queued job is there and is delivered.
	c := attemptConsumer(t, js, "default", "claude", 0)
	for _, want := range jobs {
		m := next(t, c, 5*time.Second)
		if got := attemptOf(t, m); got != want.Attempt {
			t.Errorf("job %s after restart, want %s", got, want.Attempt)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publishJob(t, js, newJob("f1", "t3", 1, "default", "claude"))
	if got := attemptOf(t, next(t, c, 5*time.Second)); got != drovertype.AttemptID("f1", "t3", 1) {
		t.Errorf("job published after restart: got %s", got)
	}

	// Claims survived: the lease is still held and renewable.
	if err := lease.Renew(ctx); err != nil {
		t.Errorf("Renew after restart: %v", err)
	}
	_, err = claims.Acquire(ctx, jobs[0].Attempt, "w2")
	wantErr(t, "Acquire of a held claim after restart", err, ErrHeld)
}
