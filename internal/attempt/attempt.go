package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/eventlog"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/scope"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
	"github.com/drover-dev/drover/internal/worktree"
)

// Job is what one attempt runs.
type Job struct {
	Flow, Task, Attempt string
	N                   int
	Epoch               uint64
	Repo, Base, Branch  string
	Prompt              string
	Timeout             time.Duration
	Merge               []eventlog.DepResult
	// Model and Args override the runtime's model and add to its arguments.
	Model string
	Args  []string
	// Checks after the CLI exits: commands, a validator's review, the scope.
	Verify        []string
	VerifyTimeout time.Duration
	Review        *Review
	Scope         *flow.Scope
	// Cancel, when closed, stops the run: the CLI's process group is
	// terminated and the attempt reports class CANCELLED.
	Cancel <-chan struct{}
}

// Review is the validator runtime that reviews an attempt's result.
type Review struct {
	Adapter adapter.Adapter
	Name    string // the runtime's name, for the report
	Model   string
	Args    []string
	Task    string // the task's prompt without retry feedback
}

// Emitter records lifecycle events. Implementations stamp the attempt's ids
// and epoch and make the event durable before returning.
type Emitter interface {
	Emit(ctx context.Context, typ eventlog.Type, key string, data any) error
}

// OutputSink receives the CLI's output as it is produced. It must not block.
type OutputSink func(s supervise.Stream, p []byte)

// Runner runs attempts. It is safe for concurrent use.
type Runner struct {
	// Cache is the worker's repo cache.
	Cache *worktree.Cache
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

// Limits of what one report and one diff event carry; the rest is counted.
const (
	maxDiffInEvent  = 64 << 10
	maxTailInReport = 8 << 10
	maxFileEvents   = 1000
)

// Run executes the lifecycle and returns the report. Events are emitted as
// phases complete; an emit failure or ctx cancellation (the claim was lost
// or the worker is going away) returns the error and no report: the job
// stays unacked and is redelivered.
func (r *Runner) Run(ctx context.Context, job *Job, ad adapter.Adapter, emit Emitter, out OutputSink) (report *eventlog.Report, retErr error) {
	log := r.Logger.With("attempt", job.Attempt, "epoch", job.Epoch)
	rep := &eventlog.Report{Branch: job.Branch, Sandbox: r.sandboxState()}
	fail := func(e *adapter.Error) (*eventlog.Report, error) {
		rep.Success = false
		rep.Error = &eventlog.ErrorInfo{Class: e.Class, Category: e.Category, Message: e.Message, Recoverable: e.Recoverable,
			Status: e.Status, RetryAfterMS: e.RetryAfter.Milliseconds(), ResetAt: e.ResetAt}
		return rep, nil
	}

	// Initialize.
	info, err := ad.Initialize(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return fail(&adapter.Error{Class: adapter.ClassConnectionFailed, Category: "runtime", Message: err.Error()})
	}
	if err := emit.Emit(ctx, eventlog.AdapterInitialized, "", eventlog.AdapterInitializedData{
		Adapter: info.Adapter, Binary: info.Binary, Version: info.Version,
	}); err != nil {
		return nil, err
	}

	// Prepare.
	scratch := fmt.Sprintf("%s-e%d", job.Attempt, job.Epoch)
	wtPath := filepath.Join(r.WorkDir, worktreesDir, scratch)
	tmp := filepath.Join(r.WorkDir, tmpDir, scratch)
	defer r.use(wtPath, tmp)()
	for _, d := range []string{filepath.Dir(wtPath), tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("attempt: %w", err)
		}
	}
	_ = os.RemoveAll(wtPath) // a previous run of this very epoch died here
	defer os.RemoveAll(tmp)
	merge := make([]worktree.Ref, len(job.Merge))
	for i, m := range job.Merge {
		merge[i] = worktree.Ref{Branch: m.Branch, Commit: m.Commit}
	}
	if err := r.checkRepo(job.Repo); err != nil {
		return fail(&adapter.Error{Class: adapter.ClassPrepareFailed, Category: "input", Message: err.Error()})
	}
	wt, err := r.Cache.Prepare(ctx, worktree.PrepareOptions{
		RepoURL: job.Repo, Base: job.Base, Branch: job.Branch, Path: wtPath, Merge: merge,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var mc *worktree.MergeConflictError
		if errors.As(err, &mc) {
			return fail(&adapter.Error{Class: adapter.ClassMergeConflict, Category: "input",
				Message: fmt.Sprintf("merging %s conflicts in %s", mc.Branch, strings.Join(mc.Paths, ", "))})
		}
		return fail(&adapter.Error{Class: adapter.ClassPrepareFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
	}
	defer func() {
		if r.KeepWorktrees {
			return
		}
		if retErr == nil && report != nil && !report.Success && r.KeepFailed > 0 {
			if err := r.keep(job, wtPath, report); err == nil {
				return
			} else {
				log.Warn("keep failed worktree", "err", err)
			}
		}
		// A succeeded attempt's checkout passed every check (scope
		// included) and is pushed: the cache may keep it for the next.
		release := r.Cache.Remove
		if retErr == nil && report != nil && report.Success {
			release = r.Cache.Release
		}
		if err := release(context.WithoutCancel(ctx), wt); err != nil {
			log.Warn("remove worktree", "err", err)
		}
	}()
	rep.Worktree = wt.Path
	// The guard remembers git's internals and the worktree's surroundings
	// before the CLI can touch them; the worktree's parent is where sibling
	// attempts live, and where a CLI escaping its worktree would write.
	guard, err := scope.NewGuard(wt.Path, scope.GitDirs{Dir: wt.GitDir(), Common: wt.CommonDir()}, filepath.Dir(wt.Path))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return fail(&adapter.Error{Class: adapter.ClassPrepareFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
	}
	if err := emit.Emit(ctx, eventlog.PrepareCompleted, "", eventlog.PrepareCompletedData{
		Worktree: wt.Path, Branch: wt.Branch, BaseCommit: wt.BaseCommit, Baseline: wt.Baseline,
	}); err != nil {
		return nil, err
	}

	// Execute, unless the operator cancelled the attempt already.
	if closed(job.Cancel) {
		return fail(cancelledError())
	}
	cmd, err := ad.Command(&adapter.Input{
		Prompt: job.Prompt, Worktree: wt.Path, TempDir: tmp, Timeout: job.Timeout,
		Model: job.Model, Args: job.Args,
		Env: []string{
			"DROVER_FLOW_ID=" + job.Flow, "DROVER_TASK_ID=" + job.Task,
			"DROVER_ATTEMPT_ID=" + job.Attempt, "DROVER_WORKTREE=" + wt.Path,
		},
	})
	if err != nil {
		return fail(&adapter.Error{Class: adapter.ClassConnectionFailed, Category: "runtime", Message: err.Error()})
	}
	reader := newOutputReader(ad)
	// The full log goes to disk (bounded by the disk, not by memory), masked,
	// and from there to the object store.
	logPath := filepath.Join(tmp, "output.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("attempt: %w", err)
	}
	defer logFile.Close()
	logW := redact.Writer(logFile, r.Redact)
	box, err := r.confine(cmd, wt, tmp)
	if err != nil {
		return fail(&adapter.Error{Class: adapter.ClassPrepareFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
	}
	proc, err := supervise.Start(ctx, supervise.Spec{
		Path: cmd.Path, Args: cmd.Args, Dir: wt.Path, Env: cmd.Env, Stdin: cmd.Stdin,
		Timeout: cmd.Timeout, NoOutputTimeout: cmd.NoOutputTimeout, Grace: cmd.Grace,
		MaxCapture: cmd.MaxOutput, OnOutput: box.tee(reader.tee(out)), LogFile: logW, Limits: cmd.Limits,
		Launch: box.launch(),
	})
	if err != nil {
		return fail(&adapter.Error{Class: adapter.ClassConnectionFailed, Category: "runtime", Message: err.Error()})
	}
	if err := emit.Emit(ctx, eventlog.RuntimeStarted, "", eventlog.RuntimeStartedData{
		Pid: proc.Pid(), Argv: append([]string{cmd.Path}, cmd.Args...), Sandbox: rep.Sandbox,
	}); err != nil {
		proc.Stop(err)
		proc.Wait()
		return nil, err
	}
	// The operator's cancel stops the whole group: SIGTERM, grace, SIGKILL.
	watchDone, watchQuit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-job.Cancel: // a nil channel never fires
			proc.Stop(errCancelled)
		case <-watchQuit:
		}
	}()
	res := proc.Wait()
	close(watchQuit)
	<-watchDone
	cancelled := (res.Outcome == supervise.Stopped && errors.Is(res.StopCause, errCancelled)) || closed(job.Cancel)
	if res.LimitErr != nil {
		log.Warn("resource limits not applied", "err", res.LimitErr)
	}
	sum := reader.summary(res.ExitCode)
	_ = logW.Close()
	if ctx.Err() != nil {
		// The claim was lost or the worker is leaving: this run's outcome is
		// not the attempt's, so report nothing.
		return nil, context.Cause(ctx)
	}
	rep.ExitCode, rep.Signal, rep.DurationMS = res.ExitCode, res.Signal, res.Duration().Milliseconds()
	rep.StdoutTail = headTail(res.Stdout.String(), maxTailInReport)
	rep.StderrTail = headTail(res.Stderr.String(), maxTailInReport)
	rep.SandboxDenied = box.denied()
	if sum != nil {
		u := sum.Usage
		if u != (transcript.Usage{}) {
			rep.Usage = &eventlog.Usage{Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD}
		}
		rep.FinalText, rep.Unparsed = tailString(sum.FinalText, maxTailInReport), sum.Unparsed
		for _, e := range sum.Events {
			if e.Kind == transcript.KindToolCall && e.Tool != "" && len(rep.ToolCalls) < 100 {
				if rep.ToolCalls == nil {
					rep.ToolCalls = map[string]int{}
				}
				rep.ToolCalls[e.Tool]++
			}
		}
	}
	if err := emit.Emit(ctx, eventlog.RuntimeExited, "", eventlog.RuntimeExitedData{
		Outcome: string(res.Outcome), ExitCode: res.ExitCode, Signal: res.Signal, DurationMS: rep.DurationMS,
		Denied: rep.SandboxDenied,
	}); err != nil {
		return nil, err
	}

	// Observe: never trust the CLI, ask git.
	changes, err := wt.Observe(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return fail(&adapter.Error{Class: adapter.ClassObserveFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
	}
	// Lists are bounded so an event stays well under the stream's message
	// size limit; the diff stat and the pushed branch have the whole story.
	rep.FilesCreated, rep.FilesModified, rep.FilesDeleted = capList(changes.Created), capList(changes.Modified), capList(changes.Deleted)
	rep.DiffSummary = changes.DiffStat
	if err := r.emitChanges(ctx, emit, changes); err != nil {
		return nil, err
	}
	// Checks, in order: cancellation, scope (the task's paths, symlinks out
	// of the worktree, git internals, writes beside the worktree), then —
	// only when the CLI itself succeeded — verification commands and the
	// review. Cancelled and out-of-scope results are never pushed: their
	// changes must not be merged. A failed verification is pushed, for
	// inspection.
	runErr := ad.Classify(res, sum)
	var failure *adapter.Error
	if cancelled {
		failure = cancelledError()
	} else if v := append(scope.Check(wt.Path, changes, job.Scope), guard.Violations()...); len(v) > 0 {
		if err := r.reportViolations(ctx, emit, rep, v); err != nil {
			return nil, err
		}
		failure = scopeError(v, runErr)
	}
	if failure == nil {
		sha, err := wt.Checkpoint(ctx, fmt.Sprintf("drover: %s attempt %d\n\nDrover-Flow: %s\nDrover-Attempt: %s", job.Task, job.N, job.Flow, job.Attempt))
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return fail(&adapter.Error{Class: adapter.ClassObserveFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
		}
		if runErr == nil && hasChecks(job) {
			cctx, stop := cancelOn(ctx, job.Cancel)
			ver, verr := r.runChecks(cctx, job, wt, reviewTempDir(tmp), cmd.Env, changes.Diff, box)
			stop()
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			// What the checks left behind (build output, commits) is not
			// the attempt's result.
			if err := resetTo(ctx, guard.GitDir(), wt.Path, wt.Branch, sha); err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return fail(&adapter.Error{Class: adapter.ClassObserveFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
			}
			switch v := guard.Violations(); {
			case closed(job.Cancel):
				failure = cancelledError()
			case len(v) > 0:
				// The validator is a coding agent too, run in the same
				// worktree: what it touched counts as much.
				for i := range v {
					v[i] = "after the checks: " + v[i]
				}
				ver.Passed, ver.ScopeViolations = false, capStrings(v, maxViolations)
				rep.ScopeViolations = ver.ScopeViolations
				failure = scopeError(v, nil)
			case verr != nil:
				failure = verr
			}
			rep.Verification = ver
			if err := emit.Emit(ctx, eventlog.VerificationCompleted, "", ver); err != nil {
				return nil, err
			}
		}
	}
	if failure == nil || failure.Class == adapter.ClassVerificationFailed {
		sha, err := wt.Push(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return fail(&adapter.Error{Class: adapter.ClassObserveFailed, Category: "infrastructure", Message: err.Error(), Recoverable: true})
		}
		rep.Commit = sha
		commits := make([]eventlog.Commit, len(changes.Commits))
		for i, c := range changes.Commits {
			commits[i] = eventlog.Commit{SHA: c.SHA, Subject: c.Subject}
			rep.CommitsCreated = append(rep.CommitsCreated, c.SHA)
		}
		if err := emit.Emit(ctx, eventlog.CheckpointCommitCreated, "", eventlog.CheckpointCommitCreatedData{
			Commit: sha, RuntimeCommits: commits,
		}); err != nil {
			return nil, err
		}
	}

	// Terminate: the process group is gone once Wait returned; say so.
	if err := emit.Emit(ctx, eventlog.RuntimeTerminated, "", struct{}{}); err != nil {
		return nil, err
	}

	r.storeArtifacts(ctx, job, rep, logPath, changes.Diff, sum)

	// Report: the operator and the scope first, then the runtime's own
	// failure, then the checks.
	if failure != nil && failure.Class != adapter.ClassVerificationFailed {
		return fail(failure)
	}
	if runErr != nil {
		return fail(runErr)
	}
	if failure != nil {
		return fail(failure)
	}
	rep.Success = true
	return rep, nil
}

// reportViolations records scope violations in the report and emits them
// as the verification's result.
func (r *Runner) reportViolations(ctx context.Context, emit Emitter, rep *eventlog.Report, violations []string) error {
	v := &eventlog.Verification{Passed: false, ScopeViolations: capStrings(violations, maxViolations)}
	rep.Verification, rep.ScopeViolations = v, v.ScopeViolations
	return emit.Emit(ctx, eventlog.VerificationCompleted, "", v)
}

func (r *Runner) emitChanges(ctx context.Context, emit Emitter, c *worktree.Changes) error {
	n := 0
	for _, set := range []struct {
		kind  string
		paths []string
	}{{"created", c.Created}, {"modified", c.Modified}, {"deleted", c.Deleted}} {
		for _, p := range set.paths {
			if n++; n > maxFileEvents {
				break
			}
			if err := emit.Emit(ctx, eventlog.FileModified, p, eventlog.FileModifiedData{Path: p, Change: set.kind}); err != nil {
				return err
			}
		}
	}
	d := eventlog.DiffComputedData{
		Created: capList(c.Created), Modified: capList(c.Modified), Deleted: capList(c.Deleted), Stat: tailString(c.DiffStat, maxDiffInEvent),
		Diff: c.Diff, DiffBytes: len(c.Diff),
	}
	if len(d.Diff) > maxDiffInEvent {
		d.Diff, d.DiffTruncated = d.Diff[:maxDiffInEvent], true
	}
	return emit.Emit(ctx, eventlog.DiffComputed, "", d)
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// capList keeps the first maxFileEvents paths of a list.
func capList(paths []string) []string {
	if len(paths) > maxFileEvents {
		return paths[:maxFileEvents]
	}
	return paths
}

// storeArtifacts uploads the full log and the patch. They are best effort:
// the report says what was stored, and a failure to store loses no state.
func (r *Runner) storeArtifacts(ctx context.Context, job *Job, rep *eventlog.Report, logPath, diff string, sum *transcript.Summary) {
	if r.Artifacts == nil {
		return
	}
	if sum != nil && len(sum.Events) > 0 {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, e := range sum.Events {
			_ = enc.Encode(outputEvent{Kind: string(e.Kind), Stream: streamName(e.Stream), Text: e.Text, Tool: e.Tool, Input: e.Input, IsError: e.IsError})
		}
		name := fmt.Sprintf("%s/e%d/events.jsonl", job.Attempt, job.Epoch)
		if _, err := r.Artifacts.Put(ctx, name, strings.NewReader(r.Redact.String(b.String()))); err != nil {
			r.Logger.Warn("store parsed events", "attempt", job.Attempt, "err", err)
		} else {
			rep.EventsObject = name
		}
	}
	if f, err := os.Open(logPath); err == nil {
		name := fmt.Sprintf("%s/e%d/output.log", job.Attempt, job.Epoch)
		if n, err := r.Artifacts.Put(ctx, name, f); err != nil {
			r.Logger.Warn("store output log", "attempt", job.Attempt, "err", err)
		} else {
			rep.LogObject, rep.LogBytes = name, n
		}
		f.Close()
	}
	if diff != "" {
		name := fmt.Sprintf("%s/e%d/diff.patch", job.Attempt, job.Epoch)
		if _, err := r.Artifacts.Put(ctx, name, strings.NewReader(r.Redact.String(diff))); err != nil {
			r.Logger.Warn("store patch", "attempt", job.Attempt, "err", err)
		} else {
			rep.PatchObject = name
		}
	}
}

// outputEvent is one normalised event of the CLI's output, as stored.
type outputEvent struct {
	Kind    string          `json:"kind"`
	Stream  string          `json:"stream"`
	Text    string          `json:"text,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
}

func streamName(s transcript.Stream) string {
	if s == transcript.Stderr {
		return "stderr"
	}
	return "stdout"
}

// headTail keeps the first and the last n/2 bytes of s: how a CLI started
// and how it ended are both worth reading in a report.
func headTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted; the full log is in the object store]…\n%s", s[:n/2], len(s)-n, s[len(s)-n/2:])
}
