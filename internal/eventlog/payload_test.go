package eventlog

import (
	"errors"
	"testing"
)

// TestPayloadTypes: every type the fold reads is decoded ahead into the
// type its handler reads, and the handler takes it, so the fold does not
// keep a second reference to it nor decode it twice.
func TestPayloadTypes(t *testing.T) {
	types := []Type{
		FlowSubmitted, FlowTasksSubmitted, FlowCompleted, AttemptScheduled, AttemptClaimed,
		AdapterInitialized, PrepareCompleted, RuntimeStarted, RuntimeExited, FileModified,
		DiffComputed, CheckpointCommitCreated, RuntimeTerminated, AttemptReported,
		RuntimeErrorClassified, TaskFailedEvent, VerificationCompleted, RuntimeRecoveryScheduled,
		CancelRequested, TaskCancelledEvent, FlowPaused, FlowResumed, TaskRetryRequested,
		AttemptAbandoned, AttemptLost, IntegrationScheduled, FlowIntegrated,
	}
	for _, typ := range types {
		d := DecodeForFold([]byte(`{"v":1,"id":"e1","type":"` + string(typ) + `","flow":"f","task":"a","attempt":"f-a-1","epoch":1,"data":{}}`))
		if d.err != nil {
			t.Fatalf("%s: %v", typ, d.err)
		}
		if d.ev.payload == nil {
			t.Errorf("%s: not decoded ahead", typ)
			continue
		}
		err := NewState().Apply(1, d.ev)
		if errors.Is(err, errPayloadType) {
			t.Errorf("%s: %v", typ, err)
		}
		if d.ev.payload != nil {
			t.Errorf("%s: the handler did not take the payload decoded ahead", typ)
		}
	}
	// A payload that does not decode is poison either way, for the same reason.
	raw := []byte(`{"v":1,"id":"e1","type":"attempt_reported","flow":"f","attempt":"x","data":{"success":"yes"}}`)
	ahead := NewState().applyDecoded(7, DecodeForFold(raw))
	st := NewState()
	now := st.applyRaw(7, raw)
	if ahead != nil || now != nil {
		t.Fatal("an undecodable payload was folded")
	}
	other := NewState()
	other.applyDecoded(7, DecodeForFold(raw))
	if got, want := other.Poisons[7].Reason, st.Poisons[7].Reason; got != want || got == "" {
		t.Errorf("poison reason decoded ahead %q, decoded by the handler %q", got, want)
	}
}
