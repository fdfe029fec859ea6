package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/tools"
)

// Input is what the attempt gives a native run: the same facts a CLI gets
// (adapter.Input) plus the scope, which the native runtime enforces itself.
type Input struct {
	Prompt string
	// Worktree is where the model works; it must exist.
	Worktree string
	// TempDir is private to the attempt: commands get it as TMPDIR.
	TempDir string
	// Scope limits which paths the file tools may change; nil allows all.
	Scope *flow.Scope
	// Env holds Drover's own variables (DROVER_TASK_ID, …) for commands.
	Env []string
	// Timeout overrides the runtime's when non-zero (task or flow level).
	Timeout time.Duration
	// Model overrides the runtime's configured model when non-empty.
	Model string
	// Sandbox, if set, confines every shell command (tools.Sandbox).
	Sandbox tools.Sandbox
}

// Outcome is how a native run ended.
type Outcome string

// The outcomes. Only Completed is a success; the others carry an Error.
const (
	// Completed: the model answered without calling a tool.
	Completed Outcome = "completed"
	// Failed: a budget ran out, or the provider refused or failed.
	Failed Outcome = "failed"
	// TimedOut: the attempt's timeout passed.
	TimedOut Outcome = "timed_out"
	// Stopped: the caller's context was cancelled (StopCause says why).
	Stopped Outcome = "stopped"
)

// Result is what the attempt builds its report from.
type Result struct {
	Outcome Outcome
	// Error is nil when Completed. Its Class is one of adapter's.
	Error *adapter.Error
	// StopCause is the context's cause when Stopped.
	StopCause error
	// FinalText is the model's last answer.
	FinalText string
	Turns     int
	Usage     model.Usage
	// Model is the model that answered, as the provider names it.
	Model   string
	CostUSD float64
	// ToolCalls counts the calls by tool name; Refusals are the paths the
	// tools refused, in order; Changed the paths file tools wrote.
	ToolCalls map[string]int
	Refusals  []tools.Refusal
	Changed   []string
	Commands  int
	Started   time.Time
	Ended     time.Time
	// LogErr is the first error writing the event stream, if any.
	LogErr error
}

// Duration is how long the run took.
func (r *Result) Duration() time.Duration { return r.Ended.Sub(r.Started) }

// ErrInput wraps every error Run returns instead of a Result: an input the
// caller should not have built (no worktree), not an outcome.
var ErrInput = errors.New("native: bad input")

// Run runs one attempt: the loop from init to done. Every turn is written
// to out as a JSON line (one Write each; nil writes nothing), so that the
// caller can stream it as the attempt's output and store it as its log.
//
// Cancelling ctx stops the model call or the command in progress at once
// and ends the run Stopped, with context.Cause(ctx) as StopCause; the
// caller tells an operator's cancel from a lost claim by that cause.
// Every other ending is a Result too; Run returns an error only for an
// unusable Input.
func (r *Runtime) Run(ctx context.Context, in *Input, out io.Writer) (*Result, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: no input", ErrInput)
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	l := newLoop(r, in, out)
	return l.run(ctx), nil
}

// check refuses an input no run can use: no worktree, or one that is not
// a directory.
func (in *Input) check() error {
	if in.Worktree == "" {
		return fmt.Errorf("%w: no worktree", ErrInput)
	}
	if st, err := os.Stat(in.Worktree); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: worktree %s: not a directory (%v)", ErrInput, in.Worktree, err)
	}
	return nil
}
