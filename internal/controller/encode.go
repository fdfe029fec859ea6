package controller

import (
	"encoding/json"
)

// A flow's status holds copies of projection records, which must not share
// memory with the live state once the projection's read lock is released.
// Copying them through JSON and encoding the copies again for the answer
// cost twice what encoding them once does, under the lock that the fold
// waits for: a detail the controller reads holds its records encoded
// instead, and sends those bytes.

// rawRecords are a detail's flow, tasks and attempts, encoded.
type rawRecords struct {
	flow            json.RawMessage
	tasks, attempts []json.RawMessage
}

// encode is a record's JSON. A projection record always encodes; were one
// not to, the answer says null rather than fail whole.
func encode(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// MarshalJSON encodes the detail, with its records as they were encoded
// under the lock when the controller read them.
func (d *FlowDetail) MarshalJSON() ([]byte, error) {
	type plain FlowDetail // without this method
	if d.raw == nil {
		return json.Marshal((*plain)(d))
	}
	// The outer fields hide the embedded ones of the same names.
	return json.Marshal(struct {
		*plain
		Flow     json.RawMessage   `json:"flow"`
		Tasks    []json.RawMessage `json:"tasks"`
		Attempts []json.RawMessage `json:"attempts"`
	}{(*plain)(d), d.raw.flow, d.raw.tasks, d.raw.attempts})
}
