package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// TestLeaderBatch: a leader's batch stamps its epoch on every event (the
// envelope) and job (a header); within a term a decision published again
// is deduplicated, while the same decision published by the next term's
// leader is stored, so that what an old leader published under an id
// cannot take it from the leader of the day.
func TestLeaderBatch(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	publish := func(epoch uint64) {
		t.Helper()
		b := NewLeaderBatch(js, epoch)
		ev, err := event.New("attempt_scheduled:f1_t1_1", event.AttemptScheduled, time.Now(), "f1", "t1", "f1_t1_1", 0,
			event.AttemptScheduledData{N: 1})
		if err != nil {
			t.Fatal(err)
		}
		b.Event(ctx, ev)
		b.Job(ctx, newJob("f1", "t1", 1, "default", "demo"), nil)
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publish(1)
	publish(1) // the same term: deduplicated
	if n := streamMsgs(t, js, EventsStream); n != 1 {
		t.Fatalf("%d events after publishing twice in one term, want 1", n)
	}
	publish(2)
	if n, m := streamMsgs(t, js, EventsStream), streamMsgs(t, js, AttemptsStream); n != 2 || m != 2 {
		t.Fatalf("%d events and %d jobs after the next term published them, want 2 and 2", n, m)
	}
	for seq, want := range map[uint64]uint64{1: 1, 2: 2} {
		msg := getMsg(t, js, EventsStream, seq)
		ev, err := event.Decode(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.LeaderEpoch != want || ev.ID != "attempt_scheduled:f1_t1_1" {
			t.Errorf("event %d: %s of leader epoch %d, want epoch %d", seq, ev.ID, ev.LeaderEpoch, want)
		}
		job := getMsg(t, js, AttemptsStream, seq)
		if got, err := LeaderEpoch(job.Header); err != nil || got != want {
			t.Errorf("job %d: leader epoch %d (%v), want %d", seq, got, err, want)
		}
	}
	// A batch of no leader stamps nothing.
	b := NewBatch(js)
	b.Job(ctx, newJob("f1", "t2", 1, "default", "demo"), nil)
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if h := getMsg(t, js, AttemptsStream, 3).Header; h.Get(LeaderEpochHeader) != "" {
		t.Errorf("a batch of no leader stamped %q", h.Get(LeaderEpochHeader))
	}
}

// TestLeaderEpochHeader: only a decimal number as Drover writes it is an
// epoch; no header is epoch 0.
func TestLeaderEpochHeader(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]uint64{"": 0, "1": 1, "18446744073709551615": 1<<64 - 1} {
		h := nats.Header{}
		if v != "" {
			h.Set(LeaderEpochHeader, v)
		}
		if got, err := LeaderEpoch(h); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"0", "01", "+1", "-1", "1e3", "x", "18446744073709551616", " 1"} {
		h := nats.Header{}
		h.Set(LeaderEpochHeader, v)
		if _, err := LeaderEpoch(h); !errors.Is(err, ErrBadLeaderEpoch) {
			t.Errorf("%q: %v, want ErrBadLeaderEpoch", v, err)
		}
	}
}

// TestEpochFence: a worker runs no job and obeys no cancel of an older
// epoch than the latest job it saw; cancels teach it nothing, so a forged
// signal of a high epoch cannot make it refuse the real jobs.
func TestEpochFence(t *testing.T) {
	t.Parallel()
	var f EpochFence
	if !f.Job(0) || !f.Cancel(0) {
		t.Fatal("a worker that has seen no epoch refused epoch 0")
	}
	if !f.Cancel(1 << 40) {
		t.Fatal("a cancel of a newer epoch refused")
	}
	if f.Latest() != 0 {
		t.Fatalf("a cancel raised the fence to %d", f.Latest())
	}
	if !f.Job(3) || f.Latest() != 3 {
		t.Fatalf("job of epoch 3: latest %d", f.Latest())
	}
	for _, e := range []uint64{0, 1, 2} {
		if f.Job(e) || f.Cancel(e) {
			t.Errorf("a job or cancel of epoch %d ran after epoch 3", e)
		}
	}
	if !f.Job(3) || !f.Cancel(3) || !f.Job(4) || f.Job(3) {
		t.Error("epochs 3, then 4, then 3 again: want run, run, refused")
	}
}
