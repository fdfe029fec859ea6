package eventlog

import (
	"bytes"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Decoding an event needs nothing but its bytes, so the fold can decode
// the next events on one core while it applies this one on another: a
// message is decoded by DecodeForFold, envelope and payload, and folded by
// Store.StageDecoded. Decoding was three fifths of the fold's CPU.

// Decoded is a message off the EVENTS stream decoded for the fold.
type Decoded struct {
	ev   *Event
	err  error // why the message is poison
	size int
}

// DecodeForFold decodes raw as the fold reads it: the envelope, checked,
// and the payload of the types the fold reads. It touches no state and is
// safe to call from any goroutine.
//
// An event as Drover writes it, its type before its data, is decoded in
// one pass: the payload straight from the message, not first read whole
// as the envelope's Data and then parsed again, which made a report, the
// largest event, a fifth slower to decode (BenchmarkDecodeForFold).
// Anything else, a poison message included, goes the two-pass way of
// Decode and Payload, so that the verdict and its reason are theirs.
func DecodeForFold(raw []byte) Decoded {
	if ev, ok := decodeOnePass(raw); ok {
		return Decoded{ev: ev, size: len(raw)}
	}
	return decodeTwoPass(raw)
}

// decodeTwoPass is DecodeForFold by Decode and Payload.
func decodeTwoPass(raw []byte) Decoded {
	ev, err := Decode(raw)
	if err == nil {
		ev.predecode()
	}
	return Decoded{ev: ev, err: err, size: len(raw)}
}

// onePass is the envelope as decodeOnePass reads it: Event's members, and
// its data decoded by foldData.
type onePass struct {
	Event
	Data foldData `json:"data,omitempty"`
}

// foldData decodes the envelope's data member into the payload its type
// names, when the type came first. The member's bytes are still the
// event's Data, as a slice of the message.
type foldData struct {
	env     *onePass
	raw     []byte // the whole message
	data    []byte
	payload any
}

func (d *foldData) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	start := dec.InputOffset() // after the member's name
	if d.env.Type == AttemptReported {
		r, err := decodeReportForFold(dec)
		if err != nil {
			return err
		}
		d.payload = r
	} else if p := newPayload(d.env.Type); p != nil {
		if err := jsonv2.UnmarshalDecode(dec, p); err != nil {
			return err
		}
		d.payload = p
	} else if err := dec.SkipValue(); err != nil {
		return err
	}
	d.data = bytes.TrimLeft(d.raw[start:dec.InputOffset()], " \t\r\n:")
	return nil
}

// stdoutTailName is the report member the fold does not keep, as a JSON
// string.
const stdoutTailName = `"stdout_tail"`

// decodeReportForFold decodes a report without its stdout tail, which the
// fold drops (see Attempt.Report): the tail is only checked, not unquoted
// and copied, which was half of what decoding a report cost. The other
// members are decoded as one object, so a report decodes as it would
// whole. Anything unusual about the tail (not a string, named twice) is an
// error, and the event then goes the two-pass way, so no verdict depends
// on this path (FuzzDecode compares the two).
func decodeReportForFold(dec *jsontext.Decoder) (*Report, error) {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errNotOnePass
	}
	rest := make([]byte, 0, 1024)
	rest = append(rest, '{')
	var tail bool
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if string(name) == stdoutTailName {
			if tail || dec.PeekKind() != '"' {
				return nil, errNotOnePass
			}
			tail = true
			if err := dec.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(append(rest, name...), ':')
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		rest = append(rest, v...)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	r := new(Report)
	if err := jsonv2.Unmarshal(append(rest, '}'), r); err != nil {
		return nil, err
	}
	r.StdoutTail = "" // named with escapes, it was not skipped
	return r, nil
}

// errNotOnePass sends an event the two-pass way.
var errNotOnePass = errors.New("eventlog: not decoded in one pass")

// decodeOnePass decodes raw into an event whose payload is decoded too, or
// reports that it could not: the message is not one Drover writes, or
// poison.
func decodeOnePass(raw []byte) (*Event, bool) {
	if len(raw) > MaxEventSize {
		return nil, false
	}
	env := &onePass{}
	env.Data.env, env.Data.raw = env, raw
	err := jsonv2.Unmarshal(raw, env)
	ev := &env.Event
	if err != nil || ev.V != Version || ev.ID == "" || ev.Type == "" || ev.Flow == "" || env.Data.data == nil {
		return nil, false
	}
	if env.Data.payload == nil && newPayload(ev.Type) != nil {
		return nil, false // the data came before the type
	}
	ev.Data, ev.payload = env.Data.data, env.Data.payload
	return ev, true
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
	ev.payload, ev.payloadErr = ev.decodePayload()
}

// decodePayload decodes ev's payload as the fold reads it: into the type
// newPayload gives (nil for types the fold does not read), and a report
// without its stdout tail, as decodeReportForFold leaves it (see
// Attempt.Report).
func (ev *Event) decodePayload() (any, error) {
	p := newPayload(ev.Type)
	if p == nil {
		return nil, nil
	}
	if err := ev.Payload(p); err != nil {
		return nil, err
	}
	if r, ok := p.(*Report); ok {
		r.StdoutTail = ""
	}
	return p, nil
}

// takePayload returns ev's payload as decodePayload decodes it: the one
// decoded ahead, which it takes (an event applied again decodes again, so
// two states never share it), or one decoded now.
func (ev *Event) takePayload() (any, error) {
	p, err := ev.payload, ev.payloadErr
	ev.payload, ev.payloadErr = nil, nil
	if p != nil || err != nil {
		return p, err
	}
	return ev.decodePayload()
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
