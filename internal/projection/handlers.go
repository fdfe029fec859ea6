package projection

import (
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/event"
)

// handlers is the one table of what the fold does with each event type:
// the payload it decodes and the function that folds it. A handler's
// payload type is its function's, so the two cannot drift apart. Types not
// listed (runtime_output_chunk, types of newer writers) change nothing.
var handlers = map[event.Type]handler{
	event.FlowSubmitted:            on((*State).flowSubmitted),
	event.FlowTasksSubmitted:       on((*State).flowTasksSubmitted),
	event.FlowCompleted:            on((*State).flowCompleted),
	event.AttemptScheduled:         on((*State).attemptScheduled),
	event.AttemptClaimed:           on((*State).attemptClaimed),
	event.AttemptReported:          on((*State).attemptReported),
	event.RuntimeErrorClassified:   on((*State).errorClassified),
	event.TaskFailed:               on((*State).taskFailed),
	event.RuntimeRecoveryScheduled: on((*State).recoveryScheduled),
	event.CancelRequested:          on((*State).cancelRequested),
	event.TaskCancelled:            on((*State).taskCancelled),
	event.AttemptAbandoned:         on((*State).attemptAbandoned),
	event.AttemptLost:              on((*State).attemptLost),
	event.FlowPaused:               on((*State).flowPaused),
	event.FlowResumed:              on((*State).flowPaused),
	event.TaskRetryRequested:       on((*State).retryRequested),
	event.IntegrationScheduled:     on((*State).integrationScheduled),
	event.FlowIntegrated:           on((*State).flowIntegrated),

	// Limits and budgets (cooldown.go, budget.go).
	event.CooldownStarted:  on((*State).cooldownStarted),
	event.CooldownReleased: on((*State).cooldownReleased),
	event.AttemptWithdrawn: on((*State).attemptWithdrawn),
	event.TaskWaiting:      on((*State).taskWaiting),
	event.BudgetSet:        on((*State).budgetSet),

	// An attempt's lifecycle, as its worker reports it.
	event.AdapterInitialized:      on(phase[event.AdapterInitializedData]),
	event.PrepareCompleted:        on(phase[event.PrepareCompletedData]),
	event.RuntimeStarted:          on(phase[event.RuntimeStartedData]),
	event.RuntimeExited:           on(phase[event.RuntimeExitedData]),
	event.FileModified:            on(phase[event.FileModifiedData]),
	event.DiffComputed:            on(phase[event.DiffComputedData]),
	event.CheckpointCommitCreated: on(phase[event.CheckpointCommitCreatedData]),
	event.VerificationCompleted:   on(phase[event.Verification]),
	event.RuntimeTerminated:       on(phase[struct{}]), // an empty object
}

// handler folds one event type.
type handler struct {
	newPayload func() any
	fold       func(s *State, ev *event.Event, payload any) error
}

// on makes the handler of a fold function: its payload is a T.
func on[T any](fold func(*State, *event.Event, *T) error) handler {
	return handler{
		newPayload: func() any { return new(T) },
		fold: func(s *State, ev *event.Event, payload any) error {
			d, ok := payload.(*T)
			if !ok {
				// Payloads are made by newPayload, and the one-pass
				// report decoder makes the report's type: a bug, which
				// TestPayloadTypes finds. The event is poison.
				return fmt.Errorf("%w: %s payload decoded as %T, read as %T", errPayloadType, ev.Type, payload, d)
			}
			return fold(s, ev, d)
		},
	}
}

// errPayloadType says a payload was decoded into another type than its
// handler reads.
var errPayloadType = errors.New("projection: payload type")
