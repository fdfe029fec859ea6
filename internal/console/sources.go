package console

import (
	"context"
	"io"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
)

// Projection is the controller's folded state (store.Store).
type Projection interface {
	// Read calls fn with the state under a read lock; fn keeps no
	// references into it.
	Read(fn func(st *projection.State))
	// Applied is the last stream sequence folded.
	Applied() uint64
}

// Folds tells when the projection changed: the channel receives after
// folds are committed, one receive standing for any number of them.
type Folds interface {
	Subscribe() (<-chan struct{}, func())
}

// Action is an operator's action.
type Action string

// The actions the console offers, each an operator API call.
const (
	ActCancel Action = "cancel"
	ActRetry  Action = "retry"
	ActPause  Action = "pause"
	ActResume Action = "resume"
)

var actions = []Action{ActCancel, ActRetry, ActPause, ActResume}

// Operator carries out an action through the controller's operator API,
// which validates it as it does the CLI's; it returns the API's message.
type Operator interface {
	Act(ctx context.Context, a Action, target, reason string) (string, error)
}

// Artifacts reads what workers stored and streamed about attempts.
type Artifacts interface {
	// Object opens an artifact (a log, a patch) by name.
	Object(ctx context.Context, name string) (io.ReadCloser, error)
	// Output follows an attempt's output chunks from the first.
	Output(ctx context.Context, flowID, attempt string) (OutputStream, error)
	// Events reads the events at these sequences of the EVENTS stream; a
	// sequence no longer there is left out.
	Events(ctx context.Context, seqs []uint64) ([]StreamEvent, error)
}

// StreamEvent is an event with its sequence on the EVENTS stream.
type StreamEvent struct {
	Seq   uint64
	Event *event.Event
}

// OutputStream yields an attempt's output chunks in order.
type OutputStream interface {
	// Next blocks for the next chunk; pending is how many more the stream
	// held when it was read.
	Next() (c event.OutputChunkData, pending uint64, err error)
	// Stop ends the stream; a blocked Next returns.
	Stop()
}

// Fleet reads the worker registry.
type Fleet interface {
	Workers(ctx context.Context) ([]*fleet.Registration, error)
	// WatchWorkers receives when registrations change, until ctx ends.
	WatchWorkers(ctx context.Context) (<-chan struct{}, error)
}

// DeadLetters reads the dead-letter stream.
type DeadLetters interface {
	DeadLetters(ctx context.Context, limit int) ([]queue.DeadLetter, error)
	// WatchDeadLetters receives messages parked from now on, until ctx ends.
	WatchDeadLetters(ctx context.Context) (<-chan queue.DeadLetter, error)
}
