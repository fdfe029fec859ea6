package eventlog

import (
	"errors"
	"fmt"
)

// Decoding an event needs nothing but its bytes, so the fold can decode
// the next events on one core while it applies this one on another: a
// message is decoded by DecodeForFold, envelope and payload, and folded by
// Store.StageDecoded. Decoding was two thirds of the fold's CPU.

// Decoded is a message off the EVENTS stream decoded for the fold.
type Decoded struct {
	ev   *Event
	err  error // why the message is poison
	size int
}

// DecodeForFold decodes raw as the fold reads it: the envelope, checked,
// and the payload of the types the fold reads. It touches no state and is
// safe to call from any goroutine.
func DecodeForFold(raw []byte) Decoded {
	ev, err := Decode(raw)
	if err == nil {
		ev.predecode()
	}
	return Decoded{ev: ev, err: err, size: len(raw)}
}

// newPayload returns a new zero payload of the type the fold decodes for
// events of type t, nil for types whose payload it does not read.
func newPayload(t Type) any {
	switch t {
	case FlowSubmitted:
		return new(FlowSubmittedData)
	case FlowTasksSubmitted:
		return new(FlowTasksSubmittedData)
	case FlowCompleted:
		return new(FlowCompletedData)
	case AttemptScheduled:
		return new(AttemptScheduledData)
	case AttemptClaimed:
		return new(AttemptClaimedData)
	case AttemptReported:
		return new(Report)
	case RuntimeErrorClassified:
		return new(RuntimeErrorClassifiedData)
	case TaskFailedEvent:
		return new(TaskFailedData)
	case RuntimeRecoveryScheduled:
		return new(RuntimeRecoveryScheduledData)
	case CancelRequested:
		return new(CancelRequestedData)
	case TaskCancelledEvent:
		return new(TaskCancelledData)
	case AttemptAbandoned:
		return new(AttemptAbandonedData)
	case AttemptLost:
		return new(AttemptLostData)
	case FlowPaused, FlowResumed, TaskRetryRequested:
		return new(OperatorData)
	case IntegrationScheduled:
		return new(IntegrationScheduledData)
	case FlowIntegrated:
		return new(FlowIntegratedData)
	case AdapterInitialized:
		return new(AdapterInitializedData)
	case PrepareCompleted:
		return new(PrepareCompletedData)
	case RuntimeStarted:
		return new(RuntimeStartedData)
	case RuntimeExited:
		return new(RuntimeExitedData)
	case FileModified:
		return new(FileModifiedData)
	case DiffComputed:
		return new(DiffComputedData)
	case CheckpointCommitCreated:
		return new(CheckpointCommitCreatedData)
	case VerificationCompleted:
		return new(Verification)
	case RuntimeTerminated:
		return new(struct{}) // an empty object
	}
	return nil
}

// predecode decodes ev's payload ahead of the fold, which takes it.
func (ev *Event) predecode() {
	if p := newPayload(ev.Type); p != nil {
		if err := ev.Payload(p); err != nil {
			ev.payloadErr = err
			return
		}
		ev.payload = p
	}
}

// takePayload returns ev's payload as newPayload types it: the one decoded
// ahead, which it takes (an event applied again decodes again, so two
// states never share it), or one decoded now.
func (ev *Event) takePayload() (any, error) {
	p, err := ev.payload, ev.payloadErr
	ev.payload, ev.payloadErr = nil, nil
	if p != nil || err != nil {
		return p, err
	}
	if p = newPayload(ev.Type); p != nil {
		if err := ev.Payload(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// payloadOf is takePayload for a handler that knows its payload's type.
func payloadOf[T any](ev *Event) (*T, error) {
	p, err := ev.takePayload()
	if err != nil {
		return nil, err
	}
	d, ok := p.(*T)
	if !ok {
		// A bug, which every test that folds the type finds: the event
		// is poison.
		return nil, fmt.Errorf("%w: %s payload decoded as %T, read as %T", errPayloadType, ev.Type, p, d)
	}
	return d, nil
}

// errPayloadType says newPayload and a handler disagree on a payload type.
var errPayloadType = errors.New("eventlog: payload type")
