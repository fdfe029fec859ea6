package controller

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// TestLostWorkerIsRetried: a worker that claims an attempt and goes silent
// for a lease is declared lost once — its claim revoked, attempt_lost
// recorded — and the task retries as a new attempt; a worker that keeps
// renewing is never lost, however long it runs.
func TestLostWorkerIsRetried(t *testing.T) {
	h := newHarness(t)
	const lease = time.Second
	h.cfg.Queue.AckWait = lease
	h.start(filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()

	backoff := flow.Duration(50 * time.Millisecond)
	spec := &flow.Spec{Name: "lost", Repo: "/srv/repo.git", Base: "main", Runtime: "demo",
		Retry: &flow.RetrySpec{InitialBackoff: &backoff},
		Tasks: []flow.Task{{ID: "a", Prompt: "p"}}}
	id, err := (&Client{NC: h.nc}).Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := drovertype.AttemptID(id, "a", 1), drovertype.AttemptID(id, "a", 2)
	h.waitFor("attempt 1", func(st *projection.State) bool { return st.Attempts[a1] != nil })

	claims, err := queue.NewClaims(ctx, h.js, lease, nil)
	if err != nil {
		t.Fatal(err)
	}
	// w1 claims attempt 1 and dies: no renewal ever.
	silent, err := claims.Acquire(ctx, a1, "w1")
	if err != nil {
		t.Fatal(err)
	}
	h.publish(event.AttemptClaimed, id, "a", a1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.waitFor("attempt 2 after the loss", func(st *projection.State) bool { return st.Attempts[a2] != nil })
	var lost projection.Attempt
	h.store.Read(func(st *projection.State) { lost = *st.Attempts[a1] })
	if lost.State != drovertype.AttemptFailed || lost.Error == nil || lost.Error.Class != "WORKER_LOST" || lost.Worker != "w1" {
		t.Errorf("lost attempt: state %s worker %s error %+v", lost.State, lost.Worker, lost.Error)
	}
	// The silent holder cannot come back, and no worker runs attempt 1 again.
	if err := silent.Renew(ctx); err == nil {
		t.Error("the lost holder renewed its claim")
	}
	if _, err := claims.Acquire(ctx, a1, "w9"); err != queue.ErrFinished {
		t.Errorf("Acquire of the lost attempt: %v, want ErrFinished", err)
	}

	// w2 runs attempt 2 for three leases, renewing: never lost.
	live, err := claims.Acquire(ctx, a2, "w2")
	if err != nil {
		t.Fatal(err)
	}
	h.publish(event.AttemptClaimed, id, "a", a2, 1, event.AttemptClaimedData{Worker: "w2"})
	end := time.Now().Add(3 * lease)
	for time.Now().Before(end) {
		time.Sleep(lease / 4)
		if err := live.Renew(ctx); err != nil {
			t.Fatalf("renewal of a live claim: %v", err)
		}
	}
	h.publish(event.AttemptReported, id, "a", a2, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 2), Commit: "c2"})
	if err := live.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the task to succeed", func(st *projection.State) bool { return st.Task(id, "a").State == drovertype.TaskSucceeded })
	if n := h.count(id, event.AttemptLost); n != 1 {
		t.Errorf("attempt_lost events = %d, want 1 (only the silent worker's)", n)
	}
	res, err := h.ctrl.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal {
		t.Errorf("rebuild differs: %v", res.Diffs)
	}
}
