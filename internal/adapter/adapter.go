package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/supervise"
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
	// Classify turns how the process ended into an error, or nil on success.
	// Exit code 0 is not success by itself: an adapter that can read a fatal
	// error in the output reports it.
	Classify(res *supervise.Result) *Error
}

// Info is what Initialize learned.
type Info struct {
	Adapter string
	Binary  string // resolved absolute path
	Version string
}

// Input is what the attempt gives the adapter.
type Input struct {
	Prompt   string
	Worktree string
	// TempDir is private to the attempt: TMPDIR and prompt files go here.
	TempDir string
	// Env holds Drover's own variables (DROVER_TASK_ID, …) to add.
	Env []string
	// Timeout overrides the runtime's when non-zero (task or flow level).
	Timeout time.Duration
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
}

// Error classes: seed 000 §9 plus the ones Drover's own phases produce.
const (
	ClassCrashed          = "RUNTIME_CRASHED"
	ClassTimeout          = "RUNTIME_TIMEOUT"
	ClassConnectionFailed = "RUNTIME_CONNECTION_FAILED"
	ClassOutputMalformed  = "RUNTIME_OUTPUT_MALFORMED"
	ClassRuntimeError     = "RUNTIME_ERROR" // exit 1-127
	ClassRateLimited      = "RATE_LIMITED"
	ClassAuthFailed       = "AUTH_FAILED"
	ClassPrepareFailed    = "PREPARE_FAILED"
	ClassMergeConflict    = "MERGE_CONFLICT"
	ClassObserveFailed    = "OBSERVE_FAILED"
)

// Error is a failure normalised into a class.
type Error struct {
	Class       string
	Category    string // runtime | infrastructure | input
	Message     string
	Recoverable bool
}

func (e *Error) Error() string { return e.Class + ": " + e.Message }

// ErrUnknownAdapter is returned by New for an adapter name no one implements.
var ErrUnknownAdapter = errors.New("adapter: unknown adapter")

// New builds the adapter a runtime's configuration names.
func New(name string, rt config.Runtime) (Adapter, error) {
	switch rt.Adapter {
	case "command", "":
		return NewCommand(name, rt), nil
	}
	return nil, fmt.Errorf("%w: %q for runtime %s", ErrUnknownAdapter, rt.Adapter, name)
}
