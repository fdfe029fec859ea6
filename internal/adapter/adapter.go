package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// Adapter is one runtime, whatever runs its agent: a CLI started as a
// process (CommandAdapter), or a loop inside the worker (package native).
// It starts a task and hands back a Handle to wait on, stop and inspect;
// what only some runtimes do is an optional interface of its own
// (HealthChecker, OutputReader, Evaluator). Implementations must be safe
// for concurrent use: a worker runs several attempts of one runtime at once.
type Adapter interface {
	// Name is the runtime's name as flows refer to it.
	Name() string
	// Initialize checks that the runtime can run here: a CLI's binary
	// exists, is executable and reports a version; a native runtime has
	// its key. Results may be cached.
	Initialize(ctx context.Context) (*Info, error)
	// Capabilities says what the runtime supports.
	Capabilities() Capabilities
	// Start starts one task and returns its handle, or an error when the
	// task cannot start (a missing binary, an input it cannot use). The
	// task runs until it ends by itself, Stop is called or ctx ends; the
	// caller must Wait for it. Start calls t.Confine once, on the caller's
	// goroutine, when it has built the task and before it starts anything;
	// an error from it fails Start.
	Start(ctx context.Context, t *Task) (Handle, error)
	// Classify judges how the task ended, with what its output said (sum,
	// nil for a runtime that is no OutputReader): nil is success. Exit
	// code 0 is not success by itself: a fatal auth or rate-limit error in
	// the output is a failure. Defaults gives Exit.Err, the runtime's own
	// verdict.
	Classify(exit *Exit, sum *transcript.Summary) *Error
}

// Handle is one started task.
type Handle interface {
	// Wait blocks until the task has ended, and everything it started with
	// it, and says how. It may be called more than once.
	Wait() *Exit
	// Stop ends the task with cause, which Wait's Exit carries as its
	// StopCause: a CLI's process group gets SIGTERM, its grace period, then
	// SIGKILL; a task in the worker stops at once. It returns without
	// waiting; the first cause counts.
	Stop(cause error)
	// Inspect says what runs.
	Inspect() Status
}

// Task is one attempt's work, as the attempt gives it to a runtime.
type Task struct {
	Input
	// Scope limits the paths the task may change; nil allows all. A
	// runtime whose tools check it first enforces it (ScopePrevented);
	// for any other, the check after the run holds it.
	Scope *flow.Scope
	// Confine, when set, is asked once, just before the task starts, what
	// confines its processes, given what they need; a nil Confiner (the
	// sandbox off) runs them as they are. Nil runs them unconfined
	// without asking.
	Confine func(Needs) (Confiner, error)
	// Output, when set, receives what the task prints as it prints it: a
	// CLI's chunks of each stream, a native runtime's events, one line a
	// call, as Stdout. It must not block.
	Output func(supervise.Stream, []byte)
	// Log, when set, receives every byte of the output, unbounded.
	Log io.Writer
}

// Needs is what a task's processes need of the sandbox that confines them.
type Needs struct {
	// Exec is the program the task starts: a CLI's binary, the native
	// runtime's shell.
	Exec string
	// Env is the environment its processes run with (PATH is read from
	// it).
	Env []string
	// Sandbox is what else they reach.
	Sandbox Sandbox
}

// Confiner confines the processes a task starts: the attempt's sandbox.
type Confiner interface {
	// Launch is a supervise.Spec's Launch that starts a program confined,
	// for the task's own process, whose output is the task's Output and
	// is read there for what the sandbox refused.
	Launch(supervise.Exec) (supervise.Exec, error)
	// Wrap confines a process whose output only the runtime reads (the
	// native runtime's commands): its Launch, and its output read for
	// what the sandbox refused on its way to the spec's OnOutput. It must
	// keep the rest of the spec.
	Wrap(spec *supervise.Spec) error
}

// Exit is how a task ended.
type Exit struct {
	// Outcome names the ending for runtime_exited: a process's
	// (supervise.Outcome: exited, signaled, timed_out, hung, stopped), or a
	// native run's (completed, failed, timed_out, stopped).
	Outcome string
	// ExitCode and Signal are a process's (-1 when a signal killed it); 0
	// and "" for a task in the worker.
	ExitCode int
	Signal   string
	// Started and Ended bound the run.
	Started, Ended time.Time
	// StopCause is Stop's cause, or ctx's, when either ended the task;
	// nil when it ended by itself or ran out of time.
	StopCause error
	// Err is how the task ended judged by the runtime without its output
	// (a process's exit, ClassifyExit; a native run's own verdict); nil
	// is success. Classify has the last word.
	Err *Error
	// Stdout and Stderr are the head and tail of each stream, for the
	// report: at most TailBytes, with a line saying what was left out.
	Stdout, Stderr string
	// What a runtime that runs the agent itself knows of the run; a CLI's
	// is read from its output (OutputReader). FinalText is the agent's last
	// answer; Usage what the model calls used, with the model that
	// answered; Turns counts its answers, ToolCalls its tool calls by
	// tool; Refusals are what the runtime refused it, one line each
	// ("write_file secrets/x: outside the task's scope"), in order.
	FinalText string
	Usage     transcript.Usage
	Turns     int
	ToolCalls map[string]int
	Refusals  []string
	// LogErr is the first error writing Task.Log; LimitErr says a
	// resource limit could not be applied.
	LogErr, LimitErr error
}

// Duration is how long the task ran.
func (e *Exit) Duration() time.Duration { return e.Ended.Sub(e.Started) }

// Status is what Inspect says of a task.
type Status struct {
	// Pid is its process's id; 0 for a task that runs in the worker.
	Pid int
	// Argv is what runs, for runtime_started: a CLI's argv, its binary
	// first; for a task in the worker, words that stand for it.
	Argv []string
	// Env is the environment its processes run with; the task's checks
	// run with the same.
	Env []string
	// Credential fingerprints the credentials it uses (never the
	// secrets; CredentialFingerprint), "" when it has none, so that a
	// rate limit on one key cools down every runtime using it.
	Credential string
}

// HealthChecker is implemented by runtimes whose health can change while a
// worker runs (a binary upgraded or removed, an endpoint down): Check runs
// the checks afresh.
type HealthChecker interface {
	Check(ctx context.Context) (*Info, error)
}

// OutputReader is implemented by runtimes that understand their CLI's
// output: the attempt feeds the parser every line of the task's Output
// while it runs, stops the task by what it says (StopOn), and gives its
// Summary to Classify.
type OutputReader interface {
	NewParser() transcript.Parser
	// OwnRetryTimeout bounds the CLI's own retries of a rate limit or of
	// refused credentials, and how long it may stay stuck on what its
	// sandbox refuses; 0 means config.DefaultOwnRetryTimeout.
	OwnRetryTimeout() time.Duration
}

// Defaults, embedded in a runtime, gives it the methods of Adapter a
// runtime that judges its own run needs no more of.
type Defaults struct{}

// Classify answers the runtime's own verdict, Exit.Err.
func (Defaults) Classify(exit *Exit, _ *transcript.Summary) *Error { return exit.Err }

// Capabilities are what a runtime can do. Workers publish them in their
// registrations (package fleet), shown by `controller runtime list`.
type Capabilities struct {
	SupportsModel               bool     `json:"supports_model"`
	SupportsNonInteractive      bool     `json:"supports_non_interactive"`
	SupportsPromptFileInclusion bool     `json:"supports_prompt_file_inclusion"`
	AvailableModels             []string `json:"available_models,omitempty"`
}

// Info is what Initialize learned.
type Info struct {
	// Adapter names the kind of runtime: command or native.
	Adapter string
	// Binary is a CLI's resolved absolute path; for a native runtime,
	// what it talks to (its provider and endpoint).
	Binary  string
	Version string
}

// Input is what the attempt gives the runtime.
type Input struct {
	Prompt   string
	Worktree string
	// TempDir is private to the attempt: the CLI's TMPDIR and HOME are
	// made in it, its prompt file goes in it, and nothing else of it is
	// the CLI's (the attempt keeps its own files there).
	TempDir string
	// Env holds Drover's own variables (DROVER_TASK_ID, …) to add.
	Env []string
	// Timeout overrides the runtime's when non-zero (task or flow level).
	Timeout time.Duration
	// Model overrides the runtime's configured model when non-empty.
	Model string
	// Args are appended to the runtime's configured arguments.
	Args []string
}

// Error is a failure normalised into a class.
type Error struct {
	Class       drovertype.ErrorClass
	Category    drovertype.Category
	Message     string
	Recoverable bool
	Status      int           // HTTP status the CLI reported, if any
	RetryAfter  time.Duration // how long the CLI says to wait, if it says
	ResetAt     time.Time     // when the CLI says a quota resets, if it says
}

func (e *Error) Error() string { return string(e.Class) + ": " + e.Message }

// ErrUnknownAdapter is returned by New for an adapter name no one implements.
var ErrUnknownAdapter = errors.New("adapter: unknown adapter")

// New builds the adapter a runtime's configuration names, when this
// package implements it: the command adapter. A native runtime runs in the
// worker's process and is built by package native, which imports this one
// (the worker's NewAdapter chooses between them).
func New(name string, rt config.Runtime) (Adapter, error) {
	switch rt.Adapter {
	case "command", "":
		return NewCommand(name, rt), nil
	case "native":
		return nil, fmt.Errorf("%w: runtime %s is native, built by package native (worker.NewAdapter)", ErrUnknownAdapter, name)
	}
	return nil, fmt.Errorf("%w: %q for runtime %s", ErrUnknownAdapter, rt.Adapter, name)
}
