package attempt

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Finishing is called once, when what is left of the attempt no longer
// uses the machine: after its CLI and its checks, before its push, its
// artifacts and its report.
func TestFinishingAfterTheChecksBeforeThePush(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt")
	job.Verify = []string{"test -f hello.txt"}
	rec := &recorder{}
	calls := 0
	job.Finishing = func() {
		calls++
		if len(rec.find(event.VerificationCompleted)) != 1 {
			t.Error("finishing before the checks ended")
		}
		if len(rec.find(event.CheckpointCommitCreated)) != 0 || h.remoteBranch(job.Branch) != "" {
			t.Error("finishing after the push")
		}
	}
	rep, err := h.runner.Run(context.Background(), job, h.agent, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Success || h.remoteBranch(job.Branch) != rep.Commit {
		t.Fatalf("report %+v", rep)
	}
	if calls != 1 {
		t.Errorf("Finishing called %d times, want 1", calls)
	}
}

// A run that ends before its checks (its Prepare failed: the base does not
// exist) and a rate-limited one never call Finishing: the worker keeps the
// slot until it has seen the report, and so the limit, before it claims
// again. A CLI that failed otherwise finishes like a success.
func TestFinishingNotForEveryEnd(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness) *Job
		class drovertype.ErrorClass
		calls int
	}{
		{"base missing", func(h *harness) *Job {
			job := h.job("echo hi > hello.txt")
			job.Base = "no-such-branch"
			return job
		}, drovertype.ClassBaseNotFound, 0},
		{"rate limited", func(h *harness) *Job {
			h.agent = adapter.NewCommand("claude-code", builtin(t, "claude-code", "claude", "10ms", time.Minute))
			return h.job("create hello.txt containing hi\n@case fail-429")
		}, drovertype.ClassRateLimited, 0},
		{"crashed", func(h *harness) *Job {
			return h.job("echo hi > hello.txt; exit 2")
		}, drovertype.ClassRuntimeError, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			job := c.setup(h)
			calls := 0
			job.Finishing = func() { calls++ }
			rep, _ := h.run(job, nil)
			wantClass(t, rep, c.class)
			if calls != c.calls {
				t.Errorf("Finishing called %d times, want %d", calls, c.calls)
			}
		})
	}
}
