package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/repocache"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/scope"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// Job is what one attempt runs: the job as queued, and what the worker that
// claimed it adds.
type Job struct {
	*queue.Job
	// Epoch is the worker's claim on the attempt; it names the run's
	// scratch paths and artifacts.
	Epoch uint64
	// Validator runs the review the job asks for (Job.Review). Nil with a
	// Review, the review fails: there is no validator runtime.
	Validator adapter.Adapter
	// Cancel, when closed, stops the run: the task is stopped (a CLI's
	// process group terminated) and the attempt reports class CANCELLED.
	Cancel <-chan struct{}
	// CancelReason, if set, says why Cancel closed (who asked, and why),
	// for the report.
	CancelReason func() string
	// Finishing, if set, is called once the attempt is done with the
	// machine: its processes have ended and their result is checked and
	// committed. What is left (the push, the artifacts, the report, the
	// checkout's release) waits on the remote, the event store and the
	// disk; the worker gives the attempt's slot to its next job then. A
	// rate-limited attempt does not call it: its worker must learn of the
	// limit before it claims again.
	Finishing func()
}

// Emitter records lifecycle events. Implementations stamp the attempt's ids
// and epoch and make the event durable before returning.
type Emitter interface {
	Emit(ctx context.Context, typ event.Type, key string, data any) error
}

// A BatchEmitter also publishes several events of one type at once, all
// acknowledged when EmitAll returns: an attempt's file events, one per
// changed file, each waited for in turn would cost a round trip to the
// server apiece.
type BatchEmitter interface {
	EmitAll(ctx context.Context, typ event.Type, events []Keyed) error
}

// Keyed is the key and data of one of the events EmitAll publishes, as
// Emit takes them.
type Keyed struct {
	Key  string
	Data any
}

// OutputSink receives the task's output as it is produced (a CLI's
// streams, a native runtime's events as stdout). It must not block.
type OutputSink func(s supervise.Stream, p []byte)

// Runner runs attempts. It is safe for concurrent use.
type Runner struct {
	// Checkouts makes the attempts' checkouts from the worker's repo
	// cache.
	Checkouts *checkout.Checkouts
	// WorkDir is where worktrees and per-attempt temp dirs are made.
	WorkDir string
	// KeepWorktrees keeps every finished worktree, for debugging; Sweep
	// removes none of them.
	KeepWorktrees bool
	// KeepFailed keeps the worktree of a failed attempt this long for
	// inspection; Sweep removes it afterwards. 0 removes it at once.
	KeepFailed time.Duration
	// Artifacts receives the full output log and the patch. Optional.
	Artifacts ArtifactStore
	// Redact masks secret values in the artifacts. Optional.
	Redact *redact.Redactor
	Logger *slog.Logger
	// Now is the clock that stamps kept worktrees. Defaults to time.Now.
	Now func() time.Time
	// Sandbox confines every process an attempt starts: the CLI, its
	// verification commands, the validator (sandbox.go). Nil runs them
	// with the worker's own access, and SandboxOff says why, on every
	// report.
	Sandbox    *sandbox.Sandbox
	SandboxOff string
	// SandboxDeny are the worker's secrets, out of every confined
	// process's reach (config.SandboxDeny).
	SandboxDeny []string

	mu   sync.Mutex
	live map[string]int // scratch paths in use, so Sweep leaves them alone
}

// ArtifactStore keeps what is too large for an event.
type ArtifactStore interface {
	Put(ctx context.Context, name string, r io.Reader) (int64, error)
}

// Run executes the lifecycle and returns the report. Events are emitted as
// phases complete; an emit failure or ctx cancellation (the claim was lost
// or the worker is going away) returns the error and no report: the job
// stays unacked and is redelivered.
func (r *Runner) Run(ctx context.Context, job *Job, ad adapter.Adapter, emit Emitter, out OutputSink) (*event.Report, error) {
	a := &run{r: r, job: job, ad: ad, emit: emit, out: out, log: r.Logger.With("attempt", job.Attempt, "epoch", job.Epoch)}
	defer a.cleanup(ctx)
	var failure *adapter.Error
	switch err := a.phases(ctx); {
	case err == nil:
		a.storeArtifacts(ctx)
		failure = a.verdict()
	case !errors.As(err, &failure):
		return nil, err
	}
	a.rep = a.report(failure)
	return a.rep, nil
}

// phases runs the lifecycle's phases in order. A phase that fails the
// attempt returns its *adapter.Error, which ends the run with a report of
// what the phases found so far; any other error ends it with no report.
// A phase whose outcome is a verdict on the result (the checks) records it
// in failure and lets the run go on.
func (a *run) phases(ctx context.Context) error {
	for _, phase := range []func(context.Context) error{
		a.initialize,
		a.prepare,
		a.execute,
		a.observe,
		a.checkScope,
		a.checkpoint,
		a.verify,
		a.finishing,
		a.push,
		a.terminate,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// run is one attempt on its way through the phases. Each phase leaves what
// it found here, for the phases after it and for the report.
type run struct {
	r    *Runner
	job  *Job
	ad   adapter.Adapter
	emit Emitter
	out  OutputSink
	log  *slog.Logger

	// Prepare: the scratch paths, marked in use until cleanup; the worktree
	// and the guard that watches what the CLI must not touch.
	wtPath, tmp string
	unuse       func()
	wt          *checkout.Checkout
	guard       *scope.Guard

	// Initialize: what the runtime is.
	info *adapter.Info

	// Execute: how the task's processes are confined, its full log, what
	// runs, how it ended, what its output said, and the runtime's own
	// failure by its end and output.
	box       *confined // nil when the sandbox is off
	asked     bool      // the runtime asked confineTask, as it must
	startErr  error     // the attempt's failure in confineTask
	logPath   string
	logFile   *os.File
	status    adapter.Status
	exit      *adapter.Exit
	sum       *transcript.Summary
	runErr    *adapter.Error
	cancelled bool // the operator's cancel stopped the task

	// Observe and the checks after it.
	changes       *checkout.Changes
	failure       *adapter.Error // the checks' verdict: cancel, scope or verification
	checkpointSHA string
	verification  *event.Verification
	violations    []string // scope violations, as the report lists them

	// Push and Report: the pushed branch and commit, if pushed.
	branch  string
	commit  string
	commits []string // the commits the runtime made itself
	stored  stored
	rep     *event.Report // what Run returned, for cleanup
}

// ended is failure, the attempt's, unless ctx has ended: then the claim
// was lost or the worker is leaving, what went wrong is not the attempt's
// outcome, and the run ends with the context's cause and no report.
func ended(ctx context.Context, failure *adapter.Error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return failure
}

// infraFailure is how a step of the worker's own machinery (git, the
// disk) fails: the attempt's recoverable failure of class, or the
// context's cause when ctx has ended (see ended).
func infraFailure(ctx context.Context, class drovertype.ErrorClass, err error) error {
	return ended(ctx, &adapter.Error{Class: class, Category: drovertype.CategoryInfrastructure, Message: err.Error(), Recoverable: true})
}

// runtimeFailure is the attempt's failure when the runtime cannot be run:
// its binary, its command line or its process.
func runtimeFailure(err error) *adapter.Error {
	return &adapter.Error{Class: drovertype.ClassConnectionFailed, Category: drovertype.CategoryRuntime, Message: err.Error()}
}

// initialize checks the runtime: its binary found, executable, its version.
func (a *run) initialize(ctx context.Context) error {
	info, err := a.ad.Initialize(ctx)
	if err != nil {
		return ended(ctx, runtimeFailure(err))
	}
	a.info = info
	return a.emit.Emit(ctx, event.AdapterInitialized, "", event.AdapterInitializedData{
		Adapter: info.Adapter, Binary: info.Binary, Version: info.Version,
	})
}

// prepare makes the run's scratch dirs and its worktree: the base revision
// on the attempt's branch with the dependencies' results merged in, and
// its baseline.
func (a *run) prepare(ctx context.Context) error {
	if err := a.scratch(); err != nil {
		return err
	}
	if err := a.r.checkRepo(a.job.Repo); err != nil {
		return &adapter.Error{Class: drovertype.ClassPrepareFailed, Category: drovertype.CategoryInput, Message: err.Error()}
	}
	wt, err := a.r.Checkouts.Prepare(ctx, checkout.PrepareOptions{
		RepoURL: a.job.Repo, Base: a.job.Base, Branch: a.job.Branch, Path: a.wtPath, Merge: mergeRefs(a.job.Merge),
	})
	if err != nil {
		var mc *checkout.MergeConflictError
		if errors.As(err, &mc) {
			return ended(ctx, &adapter.Error{Class: drovertype.ClassMergeConflict, Category: drovertype.CategoryInput,
				Message: fmt.Sprintf("merging %s conflicts in %s", mc.Branch, strings.Join(mc.Paths, ", "))})
		}
		return ended(ctx, prepareFailure(err))
	}
	a.wt = wt
	// The guard remembers git's internals and the worktree's surroundings
	// before the CLI can touch them; the worktree's parent is where sibling
	// attempts live, and where a CLI escaping its worktree would write.
	a.guard, err = scope.NewGuard(wt.Path, scope.GitDirs{Dir: wt.GitDir(), Common: wt.CommonDir()}, filepath.Dir(wt.Path))
	if err != nil {
		return infraFailure(ctx, drovertype.ClassPrepareFailed, err)
	}
	return a.emit.Emit(ctx, event.PrepareCompleted, "", event.PrepareCompletedData{
		Worktree: wt.Path, Branch: wt.Branch, BaseCommit: wt.BaseCommit, Baseline: wt.Baseline,
	})
}

// scratch names the run's worktree and temp dir after the attempt and the
// claim's epoch, marks them in use (Sweep leaves them alone) and makes
// room for them.
func (a *run) scratch() error {
	name := fmt.Sprintf("%s-e%d", a.job.Attempt, a.job.Epoch)
	a.wtPath = filepath.Join(a.r.WorkDir, worktreesDir, name)
	a.tmp = filepath.Join(a.r.WorkDir, tmpDir, name)
	a.unuse = a.r.use(a.wtPath, a.tmp)
	for _, d := range []string{filepath.Dir(a.wtPath), a.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("attempt: %w", err)
		}
	}
	_ = os.RemoveAll(a.wtPath) // a previous run of this very epoch died here
	return nil
}

func mergeRefs(deps []event.DepResult) []repocache.Ref {
	refs := make([]repocache.Ref, len(deps))
	for i, m := range deps {
		refs[i] = repocache.Ref{Branch: m.Branch, Commit: m.Commit}
	}
	return refs
}

// execute starts the runtime's task, unless the operator cancelled the
// attempt already, waits until it ends — it exits, times out, hangs or is
// stopped — and judges how it ended.
func (a *run) execute(ctx context.Context) error {
	if closed(a.job.Cancel) {
		return cancelledError(a.job)
	}
	// The full log goes to disk (bounded by the disk, not by memory),
	// masked, and from there to the object store.
	logW, err := a.openLog()
	if err != nil {
		return err
	}
	reader := newOutputReader(a.ad)
	h, err := a.ad.Start(ctx, a.task(ctx, reader, logW))
	switch {
	case a.startErr != nil:
		return a.startErr
	case err != nil:
		return runtimeFailure(err)
	case !a.asked:
		h.Stop(errUnconfined)
		h.Wait()
		return &adapter.Error{Class: drovertype.ClassPrepareFailed, Category: drovertype.CategoryRuntime, Message: errUnconfined.Error()}
	}
	a.status = h.Inspect()
	if err := a.emit.Emit(ctx, event.RuntimeStarted, "", event.RuntimeStartedData{
		Pid: a.status.Pid, Argv: a.status.Argv, Sandbox: a.r.sandboxState(),
	}); err != nil {
		h.Stop(err)
		h.Wait()
		return err
	}
	a.exit, a.cancelled = a.wait(h, reader.watch.stops(), reader.denied.stops())
	a.sum = reader.summary(a.exit.ExitCode)
	_ = logW.Close()
	if a.exit.LimitErr != nil {
		a.log.Warn("resource limits not applied", "err", a.exit.LimitErr)
	}
	if a.exit.LogErr != nil {
		a.log.Warn("the runtime's output not fully written to its log", "err", a.exit.LogErr)
	}
	if ctx.Err() != nil {
		// The claim was lost or the worker is leaving: this run's outcome
		// is not the attempt's, so report nothing.
		return context.Cause(ctx)
	}
	a.runErr = a.denied(a.ad.Classify(a.exit, a.sum))
	return a.emit.Emit(ctx, event.RuntimeExited, "", event.RuntimeExitedData{
		Outcome: a.exit.Outcome, ExitCode: a.exit.ExitCode, Signal: a.exit.Signal, DurationMS: a.exit.Duration().Milliseconds(),
		Denied: a.box.denied(),
	})
}

// task is what the runtime is asked to run: the job's input in the
// worktree, its scope, the sandbox of its processes (confineTask), its
// output to the sink, the parser and the log.
func (a *run) task(ctx context.Context, reader *outputReader, logW io.Writer) *adapter.Task {
	job := a.job
	return &adapter.Task{
		Input: adapter.Input{
			Prompt: job.Prompt, Worktree: a.wt.Path, TempDir: a.tmp, Timeout: time.Duration(job.Timeout),
			Model: job.Model, Args: job.Args, Env: a.droverEnv(),
		},
		Scope:   job.Scope,
		Confine: a.confineTask(ctx, reader),
		Output:  reader.tee(a.out),
		Log:     logW,
	}
}

// confineTask is asked by the runtime once it has built the task (a CLI's
// command line, environment and input), just before it starts it: the
// attempt records what the runtime can do for it (evaluate), then builds
// the sandbox of its processes from what they need (sandbox.go) and has
// the output read for what it refuses. Its failure, in startErr, is the
// attempt's: the context's or the emitter's, or PREPARE_FAILED when the
// sandbox cannot be built.
func (a *run) confineTask(ctx context.Context, reader *outputReader) func(adapter.Needs) (adapter.Confiner, error) {
	return func(n adapter.Needs) (adapter.Confiner, error) {
		a.asked = true
		for _, note := range n.Sandbox.Notes {
			a.log.Warn("the CLI's provider configuration", "note", note)
		}
		if err := a.evaluate(ctx); err != nil {
			a.startErr = err
			return nil, err
		}
		box, err := a.r.confine(n, a.wt, a.tmp)
		if err != nil {
			a.startErr = infraFailure(ctx, drovertype.ClassPrepareFailed, err)
			return nil, err
		}
		a.box = box
		reader.watchDenials(box, a.wt.Path)
		return box.confiner(), nil
	}
}

// errUnconfined stops a task whose runtime started it without asking for
// its sandbox (adapter.Adapter's Start must): it may be running with the
// worker's own access.
var errUnconfined = errors.New("attempt: the runtime started its task without asking for its sandbox")

// droverEnv are Drover's own variables for what the runtime runs.
func (a *run) droverEnv() []string {
	job := a.job
	return []string{
		"DROVER_FLOW_ID=" + job.Flow, "DROVER_TASK_ID=" + job.Task,
		"DROVER_ATTEMPT_ID=" + job.Attempt, "DROVER_WORKTREE=" + a.wt.Path,
	}
}

// openLog creates the run's full output log; the writer masks secrets.
func (a *run) openLog() (io.WriteCloser, error) {
	a.logPath = filepath.Join(a.tmp, "output.log")
	f, err := os.Create(a.logPath)
	if err != nil {
		return nil, fmt.Errorf("attempt: %w", err)
	}
	a.logFile = f
	return redact.Writer(f, a.r.Redact), nil
}

// wait waits for the task to end. The operator's cancel, a failure its
// output shows that it will not get past (stops, see stopWatch), or a
// refusal of the sandbox it is stuck on (denials, see denialWatch) stops
// it meanwhile: a CLI's whole group gets SIGTERM, grace, SIGKILL.
func (a *run) wait(h adapter.Handle, stops, denials <-chan error) (exit *adapter.Exit, cancelled bool) {
	watchDone, watchQuit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-a.job.Cancel: // a nil channel never fires
			h.Stop(errCancelled)
		case cause := <-stops:
			a.log.Info("stopping the CLI by its output", "cause", cause)
			h.Stop(cause)
		case cause := <-denials:
			a.log.Warn("stopping the CLI stuck on a sandbox denial", "cause", cause)
			h.Stop(cause)
		case <-watchQuit:
		}
	}()
	exit = h.Wait()
	close(watchQuit)
	<-watchDone
	return exit, errors.Is(exit.StopCause, errCancelled) || closed(a.job.Cancel)
}

// observe asks git, never the CLI, what changed against the baseline.
func (a *run) observe(ctx context.Context) error {
	changes, err := a.wt.Observe(ctx)
	if err != nil {
		return infraFailure(ctx, drovertype.ClassObserveFailed, err)
	}
	a.changes = changes
	return a.r.emitChanges(ctx, a.emit, changes)
}

// checkScope is the first of the checks (doc.go): an operator's cancel,
// then the scope — the task's paths, symlinks out of the worktree, git
// internals, writes beside the worktree. Either refuses the result: it is
// never committed nor pushed, its changes must not be merged.
func (a *run) checkScope(ctx context.Context) error {
	if a.cancelled {
		a.failure = cancelledError(a.job)
		return nil
	}
	v := append(scope.Check(a.wt.Path, a.changes, a.job.Scope), a.guard.Violations()...)
	if len(v) == 0 {
		return nil
	}
	a.failure = scopeError(v, a.runErr)
	a.verification = &event.Verification{Passed: false, ScopeViolations: capStrings(v, maxViolations)}
	a.violations = a.verification.ScopeViolations
	return a.emit.Emit(ctx, event.VerificationCompleted, "", a.verification)
}

// checkpoint commits what the CLI left uncommitted on the attempt's
// branch, unless the result was refused.
func (a *run) checkpoint(ctx context.Context) error {
	if a.failure != nil {
		return nil
	}
	sha, err := a.wt.Checkpoint(ctx, fmt.Sprintf("drover: %s attempt %d\n\nDrover-Flow: %s\nDrover-Attempt: %s", a.job.Task, a.job.N, a.job.Flow, a.job.Attempt))
	if err != nil {
		return infraFailure(ctx, drovertype.ClassObserveFailed, err)
	}
	a.checkpointSHA = sha
	return nil
}

// verify runs the task's verification commands and its review, when the
// task has checks and the CLI itself succeeded; then it puts the worktree
// back to the checkpoint and asks the guard again.
func (a *run) verify(ctx context.Context) error {
	if a.failure != nil || a.runErr != nil || !hasChecks(a.job) {
		return nil
	}
	cctx, stop := cancelOn(ctx, a.job.Cancel)
	ver, verr := a.r.runChecks(cctx, a.job, a.wt, reviewTempDir(a.tmp), a.status.Env, a.changes.Diff, a.box)
	stop()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	// What the checks left behind (build output, commits) is not the
	// attempt's result.
	if err := a.wt.ResetTo(ctx, a.checkpointSHA); err != nil {
		return infraFailure(ctx, drovertype.ClassObserveFailed, fmt.Errorf("attempt: reset the worktree to the checkpoint: %w", err))
	}
	switch v := a.guard.Violations(); {
	case closed(a.job.Cancel):
		a.failure = cancelledError(a.job)
	case len(v) > 0:
		// The validator is a coding agent too, run in the same worktree:
		// what it touched counts as much.
		for i := range v {
			v[i] = "after the checks: " + v[i]
		}
		ver.Passed, ver.ScopeViolations = false, capStrings(v, maxViolations)
		a.violations = ver.ScopeViolations
		a.failure = scopeError(v, nil)
	case verr != nil:
		a.failure = verr
	}
	a.verification = ver
	return a.emit.Emit(ctx, event.VerificationCompleted, "", ver)
}

// finishing tells the worker that what is left of the attempt no longer
// uses the machine (Job.Finishing).
func (a *run) finishing(context.Context) error {
	if a.job.Finishing == nil {
		return nil
	}
	if v := a.verdict(); v != nil && v.Class == drovertype.ClassRateLimited {
		return nil
	}
	a.job.Finishing()
	return nil
}

// push sends the attempt's branch to the remote when its result is worth
// keeping (docs/design.md, the checks' step 6): a success, which dependents
// merge even when it changed nothing, or a result that failed only its
// verification and changed something, for inspection. A refused result, a
// CLI that failed (rate limited, refused, crashed: it left at best a half
// done change), and a failed check of no change push nothing; the patch is
// in the object store and the worktree is kept for inspection.
func (a *run) push(ctx context.Context) error {
	if !a.worthKeeping() {
		return nil
	}
	sha, err := a.wt.Push(ctx)
	if err != nil {
		return infraFailure(ctx, drovertype.ClassObserveFailed, err)
	}
	a.commit, a.branch = sha, a.wt.Branch
	commits := make([]event.Commit, len(a.changes.Commits))
	for i, c := range a.changes.Commits {
		commits[i] = event.Commit{SHA: c.SHA, Subject: c.Subject}
		a.commits = append(a.commits, c.SHA)
	}
	return a.emit.Emit(ctx, event.CheckpointCommitCreated, "", event.CheckpointCommitCreatedData{
		Commit: sha, RuntimeCommits: commits,
	})
}

// worthKeeping reports whether the attempt's result is pushed.
func (a *run) worthKeeping() bool {
	switch {
	case a.runErr != nil:
		return false
	case a.failure == nil:
		return true
	case a.failure.Class == drovertype.ClassVerificationFailed:
		// What the branch would carry beyond its base: the CLI's commits
		// and the diff the checkpoint committed.
		return len(a.changes.Commits) > 0 || a.changes.Diff != ""
	}
	return false
}

// terminate says the task is gone, a CLI's process group with it: it is
// once Wait returned.
func (a *run) terminate(ctx context.Context) error {
	return a.emit.Emit(ctx, event.RuntimeTerminated, "", struct{}{})
}

// verdict is the attempt's failure once every phase ran, or nil: the
// operator and the scope first, then the runtime's own failure, then the
// checks.
func (a *run) verdict() *adapter.Error {
	switch {
	case a.failure != nil && a.failure.Class != drovertype.ClassVerificationFailed:
		return a.failure
	case a.runErr != nil:
		return a.runErr
	}
	return a.failure
}

// cleanup releases what the run holds, last made first: the log file, the
// worktree (kept, parked for reuse or removed by how the attempt ended),
// the temp dir, the scratch paths' mark.
func (a *run) cleanup(ctx context.Context) {
	if a.logFile != nil {
		a.logFile.Close()
	}
	if a.wt != nil {
		a.releaseWorktree(context.WithoutCancel(ctx))
	}
	if a.tmp != "" {
		os.RemoveAll(a.tmp)
	}
	if a.unuse != nil {
		a.unuse()
	}
}

// releaseWorktree keeps a failed attempt's worktree for inspection when
// the runner says so, parks a succeeded one's checkout for the next
// attempt, and removes any other.
func (a *run) releaseWorktree(ctx context.Context) {
	if a.r.KeepWorktrees {
		return
	}
	if a.rep != nil && !a.rep.Success && a.r.KeepFailed > 0 {
		err := a.r.keep(a.job, a.wtPath, a.rep)
		if err == nil {
			return
		}
		a.log.Warn("keep failed worktree", "err", err)
	}
	// A succeeded attempt's checkout passed every check (scope included)
	// and is pushed: the cache may keep it for the next.
	release := a.r.Checkouts.Remove
	if a.rep != nil && a.rep.Success {
		release = a.r.Checkouts.Release
	}
	if err := release(ctx, a.wt); err != nil {
		a.log.Warn("remove worktree", "err", err)
	}
}
