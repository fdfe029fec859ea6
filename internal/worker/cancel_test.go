package worker

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
)

// TestCancelSignalsChecked: on a real NATS subject, what does not decode as
// a stop signal of the attempt its subject names stops nothing and is
// counted; the controller's signal stops the attempt, and the reason it
// carries is what the attempt reports.
func TestCancelSignalsChecked(t *testing.T) {
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &Worker{log: slog.New(slog.DiscardHandler), m: newWorkerMetrics(), now: time.Now, running: map[string]*held{}}
	sub, err := nc.Subscribe(queue.CancelSubjects, w.onCancelSignal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	const att = "f-1_a_1"
	h := w.hold(att)
	other := w.hold("f-1_b_1")

	junk := []struct{ subject, body string }{
		{queue.CancelSubject(att), ""},
		{queue.CancelSubject(att), "\x8f\x00\xff random bytes \x01"},
		{queue.CancelSubject(att), `{"attempt":"f-1_b_1","reason":"x","by":"operator"}`},
		{queue.CancelSubject(att), `{"attempt":"f-1_a_1","reason":"x","by":"someone"}`},
		{queue.CancelSubject(att), `{"attempt":"f-1_a_1","reason":"x\u001b[2J","by":"operator"}`},
		{queue.CancelSubject(att), `{"attempt":"f-1_a_1","reason":"x","by":"operator","force":true}`},
		{queue.CancelSubject(att), `{"attempt":"f-1_a_1","attempt":"f-1_a_1","by":"operator"}`},
		{queue.CancelSubject(att), `{"attempt":"f-1_a_1","reason":"` + strings.Repeat("r", 5000) + `","by":"operator"}`},
		{queue.CancelSubject("f-1__integrate_1"), `{"attempt":"f-1__integrate_1","by":"operator"}`},
		{queue.CancelSubject("nonsense"), `{"attempt":"nonsense","by":"operator"}`},
	}
	for _, j := range junk {
		if err := nc.Publish(j.subject, []byte(j.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return w.ignored.Load() == int64(len(junk)) })
	if h.reason() != "" || other.reason() != "" {
		t.Fatal("junk on the cancel subject stopped an attempt")
	}

	if err := queue.SignalCancel(nc, queue.CancelSignal{Attempt: att, Reason: "cancelled by the operator: wrong prompt", By: queue.CancelByOperator}, 0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return h.reason() != "" })
	if got := h.reason(); got != "cancelled by the operator: wrong prompt" {
		t.Errorf("the attempt would report %q", got)
	}
	if other.reason() != "" {
		t.Error("the signal stopped another attempt")
	}
	if n := w.ignored.Load(); n != int64(len(junk)) {
		t.Errorf("%d signals ignored, want %d", n, len(junk))
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
