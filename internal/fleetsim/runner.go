package fleetsim

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/attempt"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/worker"
)

// Runner plays the simulated runtime behind package worker's Runner seam:
// a run emits the lifecycle events a real attempt emits, in the same order
// and with the same ids (through the worker's emitter), writes its output
// to the worker's live stream, waits its outcome's duration or its cancel,
// and returns the report a real attempt would. It is shared by every
// worker of a Fleet and safe for concurrent use.
type Runner struct {
	Mix    Mix
	Ledger *Ledger
	// Hung receives each run that hangs, once it runs, for the simulator
	// to cancel; nil drops them (they then run until the worker stops).
	Hung chan<- Hung
	// Artifacts receives each run's output log and patch, as a real
	// attempt stores them; nil stores none. A Fleet gives each worker
	// a copy of the Runner whose Artifacts go through its connection.
	Artifacts attempt.ArtifactStore
	// Now is the clock that stamps runs. Defaults to time.Now.
	Now func() time.Time
}

// Hung is a hanging run, waiting for its task to be cancelled.
type Hung struct{ Flow, Task, Attempt string }

var _ worker.Runner = (*Runner)(nil)

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Run implements worker.Runner. Like a real attempt, it returns no report
// when ctx ends first (the claim was lost, or the worker hands it back).
func (r *Runner) Run(ctx context.Context, job *attempt.Job, ad adapter.Adapter, emit attempt.Emitter, out attempt.OutputSink) (*event.Report, error) {
	run := r.Ledger.start(job.Flow, job.Task, job.Attempt, r.now())
	o := r.Mix.Outcome(job.Task, run)
	began := r.now()
	if err := r.start(ctx, job, ad, emit); err != nil {
		return nil, err
	}
	if o.Kind == Hangs && r.Hung != nil {
		select {
		case r.Hung <- Hung{Flow: job.Flow, Task: job.Task, Attempt: job.Attempt}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	cancelled, err := r.wait(ctx, job, o, out)
	if err != nil {
		return nil, err
	}
	kind := o.Kind
	if cancelled {
		kind = Hangs
	}
	took := r.now().Sub(began)
	exit := 0
	if kind != Succeeds {
		exit = 1
	}
	if err := emit.Emit(ctx, event.RuntimeExited, "", event.RuntimeExitedData{
		Outcome: string(supervise.Exited), ExitCode: exit, DurationMS: took.Milliseconds(),
	}); err != nil {
		return nil, err
	}
	rep, err := r.observe(ctx, job, emit, run, kind == Succeeds)
	if err != nil {
		return nil, err
	}
	r.store(ctx, job, o, rep)
	rep.ExitCode, rep.DurationMS, rep.StdoutTail = exit, took.Milliseconds(), tail(o.Output)
	rep.Usage = usage(o)
	if kind != Succeeds {
		rep.Error = r.failure(kind)
	}
	return rep, nil
}

// start emits what a real attempt emits before its CLI runs.
func (r *Runner) start(ctx context.Context, job *attempt.Job, ad adapter.Adapter, emit attempt.Emitter) error {
	if err := emit.Emit(ctx, event.AdapterInitialized, "", event.AdapterInitializedData{
		Adapter: "fleetsim", Binary: ad.Name(), Version: "simulated",
	}); err != nil {
		return err
	}
	wt := fmt.Sprintf("/fleetsim/worktrees/%s-e%d", job.Attempt, job.Epoch)
	if err := emit.Emit(ctx, event.PrepareCompleted, "", event.PrepareCompletedData{
		Worktree: wt, Branch: job.Branch, BaseCommit: sha("base", job.Flow), Baseline: sha("baseline", job.Attempt),
	}); err != nil {
		return err
	}
	return emit.Emit(ctx, event.RuntimeStarted, "", event.RuntimeStartedData{
		Pid: 0, Argv: []string{"fleetsim", "--task", job.Task}, Sandbox: "off: simulated runtime, no process",
	})
}

// wait writes the run's output over its duration, in pieces, and returns
// when the duration is over, or the attempt is cancelled (cancelled), or
// ctx ends (its cause). A hanging run waits for its cancel alone.
func (r *Runner) wait(ctx context.Context, job *attempt.Job, o Outcome, out attempt.OutputSink) (cancelled bool, err error) {
	const piece = 4 << 10
	pieces := max((o.Output+piece-1)/piece, 1)
	step := o.Duration / time.Duration(pieces)
	left := o.Output
	t := time.NewTimer(step)
	defer t.Stop()
	for i := 0; ; i++ {
		var expired <-chan time.Time
		if o.Kind != Hangs || i < pieces {
			expired = t.C
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-job.Cancel: // nil: never
			return true, nil
		case <-expired:
		}
		if n := min(left, piece); n > 0 && out != nil {
			out(supervise.Stdout, filler(job.Task, n))
			left -= n
		}
		if i+1 >= pieces && o.Kind != Hangs {
			return false, nil
		}
		t.Reset(step)
	}
}

// observe emits what a real attempt's Observe, checkpoint and Terminate
// emit, and returns the report's part they decide: the changed files, and
// for a success the pushed branch and commit.
func (r *Runner) observe(ctx context.Context, job *attempt.Job, emit attempt.Emitter, run int, success bool) (*event.Report, error) {
	m := r.Mix.WithDefaults()
	rep := &event.Report{Success: success, Sandbox: "off: simulated runtime, no process"}
	for i := range m.Files {
		p := fmt.Sprintf("sim/%s/file%d.go", job.Task, i)
		rep.FilesModified = append(rep.FilesModified, p)
		if err := emit.Emit(ctx, event.FileModified, p, event.FileModifiedData{Path: p, Change: "modified"}); err != nil {
			return nil, err
		}
	}
	rep.DiffSummary = fmt.Sprintf(" %d files changed, %d insertions(+)", m.Files, 3*m.Files)
	if err := emit.Emit(ctx, event.DiffComputed, "", event.DiffComputedData{
		Modified: rep.FilesModified, Stat: rep.DiffSummary, DiffBytes: 120 * m.Files,
	}); err != nil {
		return nil, err
	}
	if success {
		rep.Branch, rep.Commit = job.Branch, sha("commit", fmt.Sprintf("%s/%d", job.Attempt, run))
		if err := emit.Emit(ctx, event.CheckpointCommitCreated, "", event.CheckpointCommitCreatedData{Commit: rep.Commit}); err != nil {
			return nil, err
		}
	}
	return rep, emit.Emit(ctx, event.RuntimeTerminated, "", struct{}{})
}

// store puts the run's output log and patch in the object store, as a
// real attempt does once its phases are over; like a real one, a run whose
// artifacts cannot be stored reports without them.
func (r *Runner) store(ctx context.Context, job *attempt.Job, o Outcome, rep *event.Report) {
	if r.Artifacts == nil {
		return
	}
	name := fmt.Sprintf("%s/e%d/output.log", job.Attempt, job.Epoch)
	if n, err := r.Artifacts.Put(ctx, name, bytes.NewReader(filler(job.Task, o.Output))); err == nil {
		rep.LogObject, rep.LogBytes = name, n
	}
	name = fmt.Sprintf("%s/e%d/diff.patch", job.Attempt, job.Epoch)
	if _, err := r.Artifacts.Put(ctx, name, strings.NewReader(patch(rep.FilesModified))); err == nil {
		rep.PatchObject = name
	}
}

// patch is a run's patch: a line added to each file it changed.
func patch(files []string) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n@@ -1 +1,2 @@\n package sim\n+// simulated\n", f, f)
	}
	return b.String()
}

// failure is the error a run of kind reports.
func (r *Runner) failure(kind Kind) *event.ErrorInfo {
	e := &event.ErrorInfo{Class: kind.Class(), Category: drovertype.CategoryRuntime, Message: "simulated: the run " + kind.String()}
	switch kind {
	case Fails:
		e.Recoverable = true
	case RateLimited:
		e.Recoverable, e.Status = true, 429
		e.RetryAfterMS = r.Mix.WithDefaults().RateLimitWait.Milliseconds()
	case Hangs:
		e.Message = "simulated: cancelled while it hung"
	}
	return e
}

// Integrate implements worker.Runner: it records the build and names a
// commit for it.
func (r *Runner) Integrate(ctx context.Context, job *attempt.Job) (*event.FlowIntegratedData, error) {
	b := Build{N: job.N, Attempt: job.Attempt}
	for _, m := range job.Merge {
		b.Tasks = append(b.Tasks, m.Task)
	}
	r.Ledger.built(job.Flow, b)
	return &event.FlowIntegratedData{N: job.N, Branch: job.Branch, Commit: sha("integration", job.Attempt)}, nil
}

// Sweep implements worker.Runner: a simulated run leaves nothing behind.
func (r *Runner) Sweep(context.Context, func() bool) error { return nil }

// usage is what a run reports it used: tokens in proportion to its output.
func usage(o Outcome) *event.Usage {
	in, out := int64(2000+o.Output), int64(200+o.Output/4)
	cost := float64(in)*3e-6 + float64(out)*15e-6
	return &event.Usage{Model: "fleetsim", InputTokens: &in, OutputTokens: &out, CostUSD: &cost}
}

// sha makes a commit-like id.
func sha(parts ...string) string {
	sum := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// maxTail is the most of a run's output its report carries, as a real
// report's stdout tail is bounded.
const maxTail = 4 << 10

// tail is a report's stdout tail of a run that wrote n bytes.
func tail(n int) string { return string(filler("tail", min(n, maxTail))) }

// filler is n bytes of output lines.
func filler(task string, n int) []byte {
	line := "fleetsim: simulated output of " + task + "\n"
	b := make([]byte, 0, n+len(line))
	for len(b) < n {
		b = append(b, line...)
	}
	return b[:n]
}
