package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// Adapter is one runtime. Implementations must be safe for concurrent use:
// a worker runs several attempts of one runtime at once.
type Adapter interface {
	// Name is the runtime's name as flows refer to it.
	Name() string
	// Initialize checks that the runtime can run here: the binary exists, is
	// executable and reports a version. Results may be cached.
	Initialize(ctx context.Context) (*Info, error)
	// Command builds the process for one attempt.
	Command(in *Input) (*Command, error)
	// Capabilities says what the runtime supports.
	Capabilities() Capabilities
	// Classify turns how the process ended, and what its output said (sum,
	// nil when the adapter reads no output), into an error, or nil on
	// success. Exit code 0 is not success by itself: a fatal auth or
	// rate-limit error in the output is a failure.
	Classify(res *supervise.Result, sum *transcript.Summary) *Error
}

// OutputReader is implemented by adapters that understand their CLI's
// output; the attempt feeds the parser every line while the CLI runs.
type OutputReader interface {
	NewParser() transcript.Parser
}

// HealthChecker is implemented by adapters whose health can change while a
// worker runs (a binary upgraded or removed): Check runs the checks afresh.
type HealthChecker interface {
	Check(ctx context.Context) (*Info, error)
}

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
	Adapter string
	// Binary is a CLI's resolved absolute path; for an in-process runtime,
	// what it talks to (its provider and endpoint).
	Binary  string
	Version string
}

// Input is what the attempt gives the adapter.
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

// Command is a process ready to start under supervision.
type Command struct {
	Path            string
	Args            []string
	Env             []string
	Stdin           io.Reader
	Timeout         time.Duration
	NoOutputTimeout time.Duration
	Grace           time.Duration
	MaxOutput       int64
	Limits          supervise.Limits
	// OwnRetryTimeout bounds the CLI's own retries of a rate limit, read
	// from its output while it runs (see StopOn); 0 means the default.
	OwnRetryTimeout time.Duration
	// Sandbox is what the process may reach when the worker confines it.
	Sandbox Sandbox
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
