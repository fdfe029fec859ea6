package projection

import (
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// What the tests of package projection_test see of the fold's insides.

// Record key prefixes.
const (
	KeyFlow    = keyFlow
	KeyFlowDef = keyFlowDef
	KeyTask    = keyTask
	KeyAttempt = keyAttempt
	KeySeen    = keySeen
	KeyPoison  = keyPoison
	KeyPart    = keyPart

	KeyPoisonCount = keyPoisonCount
)

var (
	PoisonKey      = poisonKey
	DecodeTwoPass  = decodeTwoPass
	ErrPayloadType = errPayloadType
)

// DecodeOnePass reports whether raw decodes in one pass.
func DecodeOnePass(raw []byte) bool {
	_, _, ok := decodeOnePass(raw)
	return ok
}

// Parts returns what d holds.
func (d Decoded) Parts() (ev *event.Event, payload any, payloadErr, err error) {
	return d.ev, d.payload, d.payloadErr, d.err
}

// Dirty returns the keys of the records changed since ForgetChanges.
func (st *State) Dirty() map[string]struct{} {
	out := map[string]struct{}{}
	for _, e := range st.seenDirty {
		out[keySeen+e.id] = struct{}{}
	}
	for k := range st.dirty {
		out[k] = struct{}{}
	}
	return out
}

// EncodeRecord encodes the record at key k.
func (st *State) EncodeRecord(k string) ([]byte, error) { return st.encodeRecord(k) }

// HandledTypes lists the event types the fold has a handler for.
func HandledTypes() []event.Type {
	out := make([]event.Type, 0, len(handlers))
	for t := range handlers {
		out = append(out, t)
	}
	return out
}

// SetMaxUnread sets how many unread changes the task index keeps, until
// the test ends.
func SetMaxUnread(tb testing.TB, n int) {
	old := maxUnread
	maxUnread = n
	tb.Cleanup(func() { maxUnread = old })
}
