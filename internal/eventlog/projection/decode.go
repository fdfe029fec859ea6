package projection

import (
	"bytes"
	"errors"

	"github.com/drover-dev/drover/internal/eventlog/event"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Decoding an event needs nothing but its bytes, so the fold can decode
// the next events on one core while it applies this one on another: a
// message is decoded by DecodeForFold, envelope and payload, and folded by
// Store.StageDecoded. Decoding was three fifths of the fold's CPU.

// Decoded is a message off the EVENTS stream decoded for the fold: the
// subject it came on, its envelope and the payload the type's handler
// reads.
type Decoded struct {
	subject string
	ev      *event.Event
	payload any
	// payloadErr makes the event poison, unless its id was folded before:
	// the fold looks at the id first.
	payloadErr error
	err        error // why the message is poison: no valid envelope
	size       int
}

// DecodeForFold decodes raw, received on subject, as the fold reads it: the
// envelope, checked, and the payload of the types the fold reads. It
// touches no state and is safe to call from any goroutine.
//
// An event as Drover writes it, its type before its data, is decoded in
// one pass: the payload straight from the message, not first read whole
// as the envelope's Data and then parsed again, which made a report, the
// largest event, a fifth slower to decode (BenchmarkDecodeForFold).
// Anything else, a poison message included, goes the two-pass way of
// Decode and Payload, so that the verdict and its reason are theirs.
func DecodeForFold(subject string, raw []byte) Decoded {
	if ev, payload, ok := decodeOnePass(raw); ok {
		return Decoded{subject: subject, ev: ev, payload: payload, size: len(raw)}
	}
	return decodeTwoPass(subject, raw)
}

// decodeTwoPass is DecodeForFold by Decode and Payload.
func decodeTwoPass(subject string, raw []byte) Decoded {
	ev, err := event.Decode(raw)
	d := Decoded{subject: subject, ev: ev, err: err, size: len(raw)}
	if err == nil {
		d.payload, d.payloadErr = decodePayload(ev)
	}
	return d
}

// onePass is the envelope as decodeOnePass reads it: Event's members, and
// its data decoded by foldData.
type onePass struct {
	event.Event
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
	if view := foldViews[d.env.Type]; view != nil {
		p, err := view(dec)
		if err != nil {
			return err
		}
		d.payload = p
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

// foldViews decode the payloads of the types whose large strings the fold
// does not keep: checked to be strings, as a whole decode checks them, but
// not unquoted nor copied. decodePayload, the two-pass way, decodes them
// whole and then drops the same strings (trimForFold).
var foldViews = map[event.Type]func(*jsontext.Decoder) (any, error){
	event.AttemptReported: func(dec *jsontext.Decoder) (any, error) { return decodeReportForFold(dec) },
	event.DiffComputed: func(dec *jsontext.Decoder) (any, error) {
		d := &diffForFold{DiffComputedData: new(event.DiffComputedData)}
		if err := jsonv2.UnmarshalDecode(dec, d); err != nil {
			return nil, err
		}
		return d.DiffComputedData, nil
	},
}

// diffForFold is a diff_computed payload whose diff is skipped: the fold
// keeps the diff's stat alone, and the diff, up to 64 KiB, stays in the
// event.
type diffForFold struct {
	*event.DiffComputedData
	Diff skippedString `json:"diff"`
}

// trimForFold drops from a payload decoded whole what the fold views skip.
func trimForFold(p any) {
	switch p := p.(type) {
	case *event.Report:
		p.StdoutTail = ""
	case *event.DiffComputedData:
		p.Diff = ""
	}
}

// decodeReportForFold decodes a report without its stdout tail, which the
// fold drops (see Attempt.Report): the tail is only checked to be a
// string, not unquoted and copied, which was half of what decoding a
// report cost. The report is decoded in one go, as it would be whole:
// reportForFold is the report with its stdout_tail member shadowed.
// Anything unusual about the tail (not a string) is an error, and the
// event then goes the two-pass way, so no verdict depends on this path
// (FuzzDecode compares the two).
func decodeReportForFold(dec *jsontext.Decoder) (*event.Report, error) {
	r := &reportForFold{Report: new(event.Report)}
	if err := jsonv2.UnmarshalDecode(dec, r); err != nil {
		return nil, err
	}
	return r.Report, nil
}

// reportForFold is a report whose stdout tail is skipped: its member
// stdout_tail, shallower than the embedded report's, takes the name.
type reportForFold struct {
	*event.Report
	StdoutTail skippedString `json:"stdout_tail"`
}

// skippedString is a JSON string read past, not kept.
type skippedString struct{}

func (skippedString) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '"' {
		return errNotOnePass
	}
	return dec.SkipValue()
}

// errNotOnePass sends an event the two-pass way.
var errNotOnePass = errors.New("projection: not decoded in one pass")

// decodeOnePass decodes raw into an event whose payload is decoded too, or
// reports that it could not: the message is not one Drover writes, or
// poison.
func decodeOnePass(raw []byte) (*event.Event, any, bool) {
	if len(raw) > event.MaxEventSize {
		return nil, nil, false
	}
	env := &onePass{}
	env.Data.env, env.Data.raw = env, raw
	err := jsonv2.Unmarshal(raw, env)
	ev := &env.Event
	if err != nil || ev.V != event.Version || ev.ID == "" || ev.Type == "" || ev.Flow == "" || env.Data.data == nil {
		return nil, nil, false
	}
	if env.Data.payload == nil && newPayload(ev.Type) != nil {
		return nil, nil, false // the data came before the type
	}
	ev.Data = env.Data.data
	return ev, env.Data.payload, true
}

// newPayload returns a new zero payload of the type the fold's handler of
// events of type t reads, nil for types it does not fold.
func newPayload(t event.Type) any {
	if h, ok := handlers[t]; ok {
		return h.newPayload()
	}
	return nil
}

// decodePayload decodes ev's payload as the fold reads it: into the type
// newPayload gives (nil for types the fold does not read), without what
// the fold views skip (a report's stdout tail, see Attempt.Report; a
// diff).
func decodePayload(ev *event.Event) (any, error) {
	p := newPayload(ev.Type)
	if p == nil {
		return nil, nil
	}
	if err := ev.Payload(p); err != nil {
		return nil, err
	}
	trimForFold(p)
	return p, nil
}
