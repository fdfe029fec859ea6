package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// TestOldLeaderRefused: a worker runs no job of an older leader epoch than
// the latest job it was given, and terminates it (the leader of the day
// queues the attempt again under its epoch); it obeys no cancel signal of
// an older epoch either. A job with no epoch (a controller of no term) is
// refused once any leader's was seen; a junk epoch header always.
func TestOldLeaderRefused(t *testing.T) {
	nc, js := startNATS(t)
	ctx := context.Background()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &Worker{log: slog.New(slog.DiscardHandler), m: newWorkerMetrics(), now: time.Now, running: map[string]*held{}}
	job := func(task string) *queue.Job {
		return &queue.Job{Attempt: drovertype.AttemptID("f", task, 1), Flow: "f", Task: task, N: 1, Pool: "default", Runtime: "demo",
			Repo: "/r.git", Base: "main", Branch: drovertype.AttemptBranch("f", task, 1), Prompt: "p"}
	}
	for _, p := range []struct {
		task  string
		epoch uint64
	}{{"a", 2}, {"b", 1}, {"c", 0}, {"d", 3}, {"e", 2}} {
		b := queue.NewLeaderBatch(js, p.epoch)
		b.Job(ctx, job(p.task), nil)
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := queue.EnsureAttemptConsumer(ctx, js, "default", "demo", queue.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[string]bool{}
	for range 5 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			j, err := queue.DecodeJob(msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			admitted[j.Task] = w.admit(ctx, msg, j)
			if admitted[j.Task] {
				_ = msg.Ack()
			}
		}
	}
	want := map[string]bool{"a": true, "b": false, "c": false, "d": true, "e": false}
	for task, ok := range want {
		if admitted[task] != ok {
			t.Errorf("job %s admitted %v, want %v", task, admitted[task], ok)
		}
	}
	if w.epochs.Latest() != 3 {
		t.Errorf("latest epoch %d, want 3", w.epochs.Latest())
	}
	// The refused jobs are gone: terminated, not redelivered. Acks and
	// terms are not acknowledged by the server: wait for it to apply them.
	s, err := js.Stream(ctx, queue.AttemptsStream)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs left in the queue: %d", info.State.Msgs)
		}
	}

	// Cancel signals: one of epoch 2 is ignored after epoch 3, one of 3 obeyed.
	sub, err := nc.Subscribe(queue.CancelSubjects, w.onCancelSignal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	h := w.hold(drovertype.AttemptID("f", "d", 1))
	sig := queue.CancelSignal{Attempt: drovertype.AttemptID("f", "d", 1), Reason: "from the past", By: queue.CancelByOperator}
	if err := queue.SignalCancel(nc, sig, 2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return w.ignored.Load() == 1 })
	if h.reason() != "" {
		t.Fatal("a cancel of an older leader stopped the attempt")
	}
	sig.Reason = "cancelled by the operator"
	if err := queue.SignalCancel(nc, sig, 3); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return h.reason() != "" })
}
