package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/supervise"
)

// executeInProcess is the execute phase of a runtime that runs inside the
// worker (adapter.InProcess, the native runtime): Run in place of a
// supervised CLI, its events streamed as the attempt's output and kept as
// its log, the operator's cancel and the claim's end stopping it at once.
// The phases after it are the same as for a CLI: git says what changed.
func (a *run) executeInProcess(ctx context.Context, ip adapter.InProcess) error {
	if err := a.evaluate(ctx); err != nil {
		return err
	}
	// The model's commands run under the attempt's sandbox, as a CLI does:
	// the shell may write the worktree and the attempt's TMPDIR.
	box, err := a.r.confine(&adapter.Command{Path: shellPath(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Sandbox: adapter.Sandbox{Write: []string{a.tmp}}}, a.wt, a.tmp)
	if err != nil {
		return infraFailure(ctx, drovertype.ClassPrepareFailed, err)
	}
	a.box = box
	logW, err := a.openLog()
	if err != nil {
		return err
	}
	a.ipOut = &inProcessOutput{sink: a.out, log: logW}
	job := a.job
	in := &adapter.RunInput{
		Input: adapter.Input{Prompt: job.Prompt, Worktree: a.wt.Path, TempDir: a.tmp, Timeout: time.Duration(job.Timeout),
			Model: job.Model, Args: job.Args, Env: a.droverEnv()},
		Scope: job.Scope,
		// Every command the model runs (the bash tool) starts confined.
		Confine: a.box.confiner(),
	}
	if err := a.emit.Emit(ctx, event.RuntimeStarted, "", event.RuntimeStartedData{Pid: 0, Argv: ip.Argv(job.Model)}); err != nil {
		return err
	}
	rctx, stop := cancelOn(ctx, job.Cancel)
	res, err := ip.Run(rctx, in, a.ipOut)
	stop()
	_ = logW.Close()
	if ctx.Err() != nil {
		// The claim was lost or the worker is leaving: not the attempt's
		// outcome (see execute).
		return context.Cause(ctx)
	}
	if err != nil {
		return runtimeFailure(err)
	}
	if err := errors.Join(res.LogErr, a.ipOut.err()); err != nil {
		a.log.Warn("native runtime output not fully written", "err", err)
	}
	a.ipRes, a.runErr = res, res.Err
	a.cancelled = errors.Is(res.StopCause, errCancelled) || closed(job.Cancel)
	return a.emit.Emit(ctx, event.RuntimeExited, "", event.RuntimeExitedData{
		Outcome: res.Outcome, DurationMS: res.Duration().Milliseconds(),
	})
}

// droverEnv are Drover's own variables for what the runtime runs.
func (a *run) droverEnv() []string {
	job := a.job
	return []string{
		"DROVER_FLOW_ID=" + job.Flow, "DROVER_TASK_ID=" + job.Task,
		"DROVER_ATTEMPT_ID=" + job.Attempt, "DROVER_WORKTREE=" + a.wt.Path,
	}
}

// checkEnv is the environment the task's checks run with: the CLI's, or
// the one an in-process runtime's commands had.
func (a *run) checkEnv() []string {
	if a.ipRes != nil {
		return a.ipRes.Env
	}
	return a.cmd.Env
}

// reportInProcess adds to the report what an in-process run said: its
// duration, usage, turns, tool calls, refusals, last answer, credential,
// and the head and tail of its event log where a CLI's stdout goes.
func (a *run) reportInProcess(rep *event.Report) {
	res := a.ipRes
	rep.DurationMS = res.Duration().Milliseconds()
	rep.StdoutTail = a.ipOut.headTail()
	rep.Usage, rep.Turns, rep.Credential = usage(res.Usage), res.Turns, res.Credential
	rep.FinalText = tailString(res.FinalText, maxTailInReport)
	rep.Refusals = capStrings(res.Refusals, maxViolations)
	for tool, n := range res.ToolCalls {
		if len(rep.ToolCalls) == maxToolsCounted {
			break // a model may call tools that do not exist, under any name
		}
		if rep.ToolCalls == nil {
			rep.ToolCalls = map[string]int{}
		}
		rep.ToolCalls[tool] = n
	}
}

// inProcessOutput is where an in-process runtime writes its events, one
// Write each: to the output sink as stdout (the OUTPUT stream, which
// `controller logs -f` follows), to the attempt's log, masked, and into
// the head and tail the report keeps. A write never fails, so a full disk
// does not cut the live stream; the first log error is kept.
type inProcessOutput struct {
	sink OutputSink
	log  io.Writer

	mu         sync.Mutex
	head, tail []byte
	omitted    int64
	logErr     error
}

func (o *inProcessOutput) Write(p []byte) (int, error) {
	if o.sink != nil {
		o.sink(supervise.Stdout, p)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.log.Write(p); err != nil && o.logErr == nil {
		o.logErr = err
	}
	const half = maxTailInReport / 2
	rest := p
	if n := min(half-len(o.head), len(rest)); n > 0 {
		o.head, rest = append(o.head, rest[:n]...), rest[n:]
	}
	o.tail = append(o.tail, rest...)
	if cut := len(o.tail) - half; cut > half { // trim in steps, not on every write
		o.omitted += int64(cut)
		o.tail = append(o.tail[:0], o.tail[cut:]...)
	}
	return len(p), nil
}

// headTail is the log's head and tail, cut as headTail cuts a CLI's
// stdout.
func (o *inProcessOutput) headTail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	const half = maxTailInReport / 2
	tail, omitted := o.tail, o.omitted
	if cut := len(tail) - half; cut > 0 {
		tail, omitted = tail[cut:], omitted+int64(cut)
	}
	if omitted == 0 {
		return string(o.head) + string(tail)
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted; the full log is in the object store]…\n%s", o.head, omitted, tail)
}

func (o *inProcessOutput) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.logErr
}

// shellPath is the shell the native runtime's bash tool runs commands with,
// found as its tools find it (internal/native/tools): bash if there is
// one, else /bin/sh.
func shellPath() string {
	if p, err := exec.LookPath("bash"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return "/bin/sh"
}
