package adapter

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// InProcess is implemented by a runtime that runs inside the worker's
// process instead of as a CLI: the native runtime (package native), which
// talks to a model API itself and runs every tool call the model makes.
// The attempt's execute phase calls Run where it would start Command under
// supervision; what comes after (observe, the checks, push) is the same
// for both, since git, not the runtime, says what changed.
//
// It is an Adapter still, so that a worker holds it as any other runtime;
// InProcessDefaults gives it the methods that are about a process.
type InProcess interface {
	Adapter
	// Run runs one attempt until the agent is done, fails, runs out of
	// time or ctx ends. It writes what happens to out as it happens, one
	// Write per event (nil writes nothing). Cancelling ctx stops the run
	// at once; the result then says Stopped with ctx's cause. Run returns
	// an error only for an input it cannot use; every other ending is a
	// RunResult.
	Run(ctx context.Context, in *RunInput, out io.Writer) (*RunResult, error)
	// Argv stands for what runs, in runtime_started, where a CLI's argv
	// goes (model empty: the configured one). There is no process: its
	// pid is 0.
	Argv(model string) []string
}

// Evaluator is implemented by adapters that say more about an attempt's
// runtime than their Capabilities, before it starts: which model API and
// tools it uses, how the task's scope is enforced, its budget.
type Evaluator interface {
	Evaluate(model string) Evaluation
}

// Evaluate is what ad says about an attempt asking for model: its
// Evaluation, or for an adapter that is no Evaluator its capabilities, the
// model asked for and scope found after the run.
func Evaluate(ad Adapter, model string) Evaluation {
	if ev, ok := ad.(Evaluator); ok {
		return ev.Evaluate(model)
	}
	return Evaluation{Capabilities: ad.Capabilities(), Model: model, ScopeEnforcement: ScopeDetected}
}

// Evaluation is what a runtime can do for one attempt and how it is
// bounded; the attempt records it as runtime_capabilities_evaluated.
type Evaluation struct {
	Capabilities
	// Provider, BaseURL: the model API an in-process runtime talks to.
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	// Model is the model the attempt asks for, or the configured one.
	Model string `json:"model,omitempty"`
	// Tools are the tools an in-process runtime offers the model.
	Tools            []string         `json:"tools,omitempty"`
	ScopeEnforcement ScopeEnforcement `json:"scope_enforcement"`
	// Budget bounds an in-process runtime's attempt; nil for a CLI.
	Budget *Budget `json:"budget,omitempty"`
}

// ScopeEnforcement says how a task's scope holds.
type ScopeEnforcement string

const (
	// ScopePrevented: every change goes through a tool that checks the
	// scope first, so a change outside it never happens.
	ScopePrevented ScopeEnforcement = "prevented"
	// ScopeDetected: the check after the run finds a change outside the
	// scope, and the result is refused.
	ScopeDetected ScopeEnforcement = "detected"
)

// Budget bounds one attempt of an in-process runtime; a zero field is no
// bound. Each bound reached ends the attempt with its own error class.
type Budget struct {
	Turns        int           `json:"turns,omitempty"`
	Tokens       int64         `json:"tokens,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty"`
	Time         time.Duration `json:"time_ns,omitempty"`
}

// RunInput is what an in-process runtime gets for one attempt: what a CLI
// gets, plus the task's scope, which it enforces itself, and the sandbox
// the commands it runs must go through.
type RunInput struct {
	Input
	// Scope limits the paths the runtime may change; nil allows all.
	Scope *flow.Scope
	// Confine, when set, confines every command the runtime starts, as the
	// attempt's sandbox confines a CLI. Nil runs them with the worker's own
	// access (a worker with worker.sandbox off).
	Confine Confiner
}

// Confiner confines a process before it starts: Wrap may rewrite the
// spec's launch (to start it through the step that restricts itself and
// execs it) and its output handler, and must keep the rest.
type Confiner interface {
	Wrap(spec *supervise.Spec) error
}

// RunResult is how an in-process run ended, for the attempt's report.
type RunResult struct {
	// Outcome names the ending for runtime_exited: completed, failed,
	// timed_out or stopped.
	Outcome string
	// Err is the runtime's failure; nil is success.
	Err *Error
	// StopCause is ctx's cause when ctx ended the run, else nil.
	StopCause error
	// FinalText is the agent's last answer.
	FinalText string
	// Usage is what the model calls used, with the model that answered
	// and what it cost.
	Usage transcript.Usage
	// Turns counts the model's answers; ToolCalls the tool calls by tool.
	Turns     int
	ToolCalls map[string]int
	// Refusals are what the runtime refused the agent, one line each
	// ("write_file secrets/x: outside the task's scope"), in order.
	Refusals []string
	// Env is the environment the runtime's commands ran with; the task's
	// checks run with the same.
	Env []string
	// Credential fingerprints the credential the runtime used (never the
	// secret), as a CLI's are fingerprinted from its environment; "" when
	// it used none.
	Credential string
	// Started and Ended bound the run.
	Started, Ended time.Time
	// LogErr is the first error writing out, if any.
	LogErr error
}

// Duration is how long the run took.
func (r *RunResult) Duration() time.Duration { return r.Ended.Sub(r.Started) }

// ErrInProcess is what an in-process runtime's Command answers: it runs no
// process of its own.
var ErrInProcess = errors.New("adapter: an in-process runtime runs no command")

// InProcessDefaults, embedded in an in-process runtime, gives it the two
// methods of Adapter that are about a process.
type InProcessDefaults struct{}

// Command answers ErrInProcess: the attempt calls Run instead.
func (InProcessDefaults) Command(*Input) (*Command, error) { return nil, ErrInProcess }

// Classify reads a process's end as every adapter does. The attempt never
// asks an in-process runtime: its RunResult carries its failure.
func (InProcessDefaults) Classify(res *supervise.Result, _ *transcript.Summary) *Error {
	return ClassifyExit(res)
}
