package projection

import (
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// handlers is the one table of what the fold does with each event type:
// the payload it decodes, the function that folds it, what its envelope
// names and how its id is made. A handler's payload type is its function's,
// so the two cannot drift apart. A type not listed is poison: nothing
// Drover writes on the EVENTS stream is missing here (runtime_output_chunk
// goes to the OUTPUT stream).
var handlers = map[event.Type]handler{
	event.FlowSubmitted:            on((*State).flowSubmitted, aboutFlow, idFlow),
	event.FlowTasksSubmitted:       on((*State).flowTasksSubmitted, aboutFlow, idFlowN),
	event.FlowCompleted:            on((*State).flowCompleted, aboutFlow, idFlowRound),
	event.AttemptScheduled:         on((*State).attemptScheduled, aboutAttempt, idAttempt),
	event.AttemptClaimed:           on((*State).attemptClaimed, aboutClaimOrBuild, idClaim),
	event.AttemptReported:          on((*State).attemptReported, aboutClaim, idClaim),
	event.RuntimeErrorClassified:   on((*State).errorClassified, aboutAttempt, idAttempt),
	event.TaskFailed:               on((*State).taskFailed, aboutTaskMaybeAttempt, idAttemptOrBudget),
	event.RuntimeRecoveryScheduled: on((*State).recoveryScheduled, aboutAttempt, idAttempt),
	event.CancelRequested:          on((*State).cancelRequested, aboutRequest, idRandom),
	event.TaskCancelled:            on((*State).taskCancelled, aboutTaskMaybeAttempt, idTaskRound),
	event.AttemptAbandoned:         on((*State).attemptAbandoned, aboutAttempt, idAttempt),
	event.AttemptLost:              on((*State).attemptLost, aboutLostClaim, idClaim),
	event.FlowPaused:               on((*State).flowPaused, aboutFlow, idRandom),
	event.FlowResumed:              on((*State).flowPaused, aboutFlow, idRandom),
	event.TaskRetryRequested:       on((*State).retryRequested, aboutTask, idRandom),
	event.IntegrationScheduled:     on((*State).integrationScheduled, aboutFlow, idFlowN),
	event.FlowIntegrated:           on((*State).flowIntegrated, aboutBuild, idClaim),

	// Limits and budgets (cooldown.go, budget.go).
	event.CooldownStarted:  on((*State).cooldownStarted, aboutAttempt, idAttemptAnd),
	event.CooldownReleased: on((*State).cooldownReleased, aboutAttempt, idAttemptAnd),
	event.AttemptWithdrawn: on((*State).attemptWithdrawn, aboutAttempt, idAttempt),
	event.TaskWaiting:      on((*State).taskWaiting, aboutTask, idTaskRound),
	event.BudgetSet:        on((*State).budgetSet, aboutRequest, idRandom),

	// Placement: whether live workers serve a runtime, and an attempt none
	// took for its placement timeout (placement.go).
	event.PlacementChanged: on((*State).placementChanged, aboutAttempt, idAttemptAnd),
	event.AttemptUnplaced:  on((*State).attemptUnplaced, aboutAttempt, idAttempt),

	// A flow published as a pull request, and its review rounds (pullrequest.go).
	event.PullRequestRequested: on((*State).pullRequestRequested, aboutFlow, idFlowAnd),
	event.PullRequestPublished: on((*State).pullRequestPublished, aboutFlow, idFlowN),
	event.PullRequestObserved:  on((*State).pullRequestObserved, aboutFlow, idFlowN),
	event.PullRequestFeedback:  on((*State).pullRequestFeedback, aboutFlow, idFlowAnd),
	event.ReviewRoundStarted:   on((*State).reviewRoundStarted, aboutFlow, idFlowN),

	// Who leads the controllers (leadership.go).
	event.LeaderElected: on((*State).leaderElected, aboutLeadership, idLeaderEpoch),

	// An attempt's lifecycle, as its worker reports it.
	event.AdapterInitialized: on(phase[event.AdapterInitializedData], aboutClaim, idClaim),
	event.PrepareCompleted:   on(phase[event.PrepareCompletedData], aboutClaim, idClaim),
	// Observational, but an attempt's phase like the others: a payload
	// that does not decode is poison, and a superseded claim's is ignored.
	event.RuntimeCapabilitiesEvaluated: on(phase[event.RuntimeCapabilitiesEvaluatedData], aboutClaim, idClaim),
	event.RuntimeStarted:               on(phase[event.RuntimeStartedData], aboutClaim, idClaim),
	event.RuntimeExited:                on(phase[event.RuntimeExitedData], aboutClaim, idClaim),
	event.FileModified:                 on(phase[event.FileModifiedData], aboutClaim, idClaim),
	event.DiffComputed:                 on(phase[event.DiffComputedData], aboutClaim, idClaim),
	event.CheckpointCommitCreated:      on(phase[event.CheckpointCommitCreatedData], aboutClaim, idClaim),
	event.VerificationCompleted:        on(phase[event.Verification], aboutClaim, idClaim),
	event.RuntimeTerminated:            on(phase[struct{}], aboutClaim, idClaim), // an empty object
}

// handler folds one event type.
type handler struct {
	newPayload func() any
	fold       func(s *State, ev *event.Event, payload any) error
	about      about
	key        idRule
}

// on makes the handler of a fold function: its payload is a T.
func on[T any](fold func(*State, *event.Event, *T) error, a about, k idRule) handler {
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
		about: a,
		key:   k,
	}
}

// errPayloadType says a payload was decoded into another type than its
// handler reads.
var errPayloadType = errors.New("projection: payload type")
