package projection

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/drover-dev/drover/internal/flow"
)

// The projection is a set of records, each a key and a JSON value, so that
// a store can persist exactly the ones a fold changed (ChangedRecords) and
// load them back (LoadRecord). The store adds nothing but the applied
// sequence.

// Record key prefixes in the projection. A key names one JSON record.
const (
	keyFlow     = "f/"
	keyFlowDef  = "fd/" // a flow's definition: its spec and order
	keyTask     = "t/"
	keyAttempt  = "a/"
	keySeen     = "e/"
	keyPoison   = "p/"
	keyPart     = "s/"
	keyCooldown = "c/"
	// keyPlacement holds State.Placements.
	keyPlacement = "l/"

	// keyPoisonCount holds State.PoisonCount.
	keyPoisonCount = "n/poisons"
)

// flowDefinition is the record of what a flow was submitted as: its spec
// and the order of its tasks, which never change. The flow's record holds
// the rest (Flow.Spec).
type flowDefinition struct {
	ID    string    `json:"id"`
	Order []string  `json:"order"`
	Spec  flow.Spec `json:"spec"`
}

// partKey names a part of a flow in State.Parts; the part number is padded
// so the parts of a flow sort in order.
func partKey(flowID string, part int) string { return fmt.Sprintf("%s/%06d", flowID, part) }

func (s *State) mark(key string) {
	s.dirty[key] = struct{}{}
	s.index.note(key)
	if s.onMark != nil {
		s.onMark(key)
	}
}

// OnMark has fn called with the key of every record the fold changes from
// now on (nil: no more), in the fold and under its lock: how a reader
// learns what one event changed without walking what it might have.
func (s *State) OnMark(fn func(key string)) { s.onMark = fn }

// TaskOfRecord is the task (its key in Tasks) whose record key is, if it
// is a task's.
func TaskOfRecord(key string) (taskKey string, ok bool) { return strings.CutPrefix(key, keyTask) }

// AttemptOfRecord is the attempt whose record key is, if it is an
// attempt's.
func AttemptOfRecord(key string) (id string, ok bool) { return strings.CutPrefix(key, keyAttempt) }

func poisonKey(seq uint64) string { return fmt.Sprintf("%s%020d", keyPoison, seq) }

// insertSeq inserts seq into the sorted seqs.
func insertSeq(seqs []uint64, seq uint64) []uint64 {
	i, _ := slices.BinarySearch(seqs, seq)
	return slices.Insert(seqs, i, seq)
}

// ChangedRecords calls fn with every record the fold changed since
// ForgetChanges, its value nil for a record it removed. It stops at fn's
// first error. The key and the value are valid only during the call: the
// buffers are reused, so that a commit allocates nothing per record.
//
// The ids seen since ForgetChanges come in the order they were seen, from
// their own list: one per folded event, they are most of the records, and
// a key in the dirty set each cost a string, a map insertion and a lookup.
func (st *State) ChangedRecords(fn func(key, value []byte) error) error {
	var key []byte
	for _, e := range st.seenDirty {
		key = append(append(key[:0], keySeen...), e.id...)
		st.enc = strconv.AppendUint(st.enc[:0], e.seq, 10)
		if err := fn(key, st.enc); err != nil {
			return err
		}
	}
	for k := range st.dirty {
		v, err := st.appendRecord(st.enc[:0], k)
		if err != nil {
			return err
		}
		if v != nil {
			st.enc = v
		}
		if err := fn(append(key[:0], k...), v); err != nil {
			return err
		}
	}
	return nil
}

// ChangedCount is how many records ChangedRecords gives, besides those of
// the ids seen (one per event folded, cheap to write).
func (st *State) ChangedCount() int { return len(st.dirty) }

// Changed reports whether any record changed since ForgetChanges.
func (st *State) Changed() bool { return len(st.dirty) > 0 || len(st.seenDirty) > 0 }

// maxKeptDirty is the most changed records whose room ForgetChanges keeps
// for the next changes.
const maxKeptDirty = 1024

// ForgetChanges marks every record as persisted.
func (st *State) ForgetChanges() {
	if len(st.dirty) > maxKeptDirty {
		// A map keeps the room it grew to, and walking it costs that room:
		// after a flow's submission marked its every task, each commit of
		// one event's records walked 100,000 empty slots.
		st.dirty = make(map[string]struct{})
	} else {
		clear(st.dirty)
	}
	st.seenDirty = st.seenDirty[:0]
}

// Records calls fn with every record of the state, in no order.
func (st *State) Records(fn func(key string, value []byte) error) error {
	var keys []string
	for id := range st.Flows {
		keys = append(keys, keyFlow+id, keyFlowDef+id)
	}
	for k := range st.Tasks {
		keys = append(keys, keyTask+k)
	}
	for id := range st.Attempts {
		keys = append(keys, keyAttempt+id)
	}
	for id := range st.Seen {
		keys = append(keys, keySeen+id)
	}
	for seq := range st.Poisons {
		keys = append(keys, poisonKey(seq))
	}
	for k := range st.Parts {
		keys = append(keys, keyPart+k)
	}
	for k := range st.Cooldowns {
		keys = append(keys, keyCooldown+k)
	}
	for k := range st.Placements {
		keys = append(keys, keyPlacement+k)
	}
	if st.PoisonCount > 0 {
		keys = append(keys, keyPoisonCount)
	}
	if st.Leadership != nil {
		keys = append(keys, keyLeadership)
	}
	for _, k := range keys {
		v, err := st.encodeRecord(k)
		if err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// LoadRecord puts back a record that ChangedRecords or Records gave out.
func (st *State) LoadRecord(k string, v []byte) error {
	st.index.invalidate()
	st.downstream = nil
	var err error
	switch {
	case strings.HasPrefix(k, keyFlow):
		var f Flow
		if err = loadJSON(v, &f); err == nil {
			switch old := st.Flows[f.ID]; {
			case old != nil:
				f.Order, f.Spec = old.Order, old.Spec // its definition, loaded first
			case len(f.Order) > 0 || len(f.Spec.Tasks) > 0:
				// Written before definitions had a record of their own:
				// written again, split, by the store's next commit.
				st.mark(keyFlow + f.ID)
				st.mark(keyFlowDef + f.ID)
			}
			st.Flows[f.ID] = &f
		}
	case strings.HasPrefix(k, keyFlowDef):
		var d flowDefinition
		if err = loadJSON(v, &d); err == nil {
			f := st.Flows[d.ID]
			if f == nil {
				f = &Flow{ID: d.ID}
				st.Flows[d.ID] = f
			}
			f.Order, f.Spec = d.Order, d.Spec
		}
	case strings.HasPrefix(k, keyTask):
		var t Task
		if err = loadJSON(v, &t); err == nil {
			if t.Plan != nil {
				t.Plan = st.sharedPlan(t.Plan)
			}
			st.Tasks[TaskKey(t.Flow, t.ID)] = &t
		}
	case strings.HasPrefix(k, keyAttempt):
		var a Attempt
		if err = loadJSON(v, &a); err == nil {
			st.Attempts[a.ID] = &a
		}
	case strings.HasPrefix(k, keySeen):
		var n uint64
		if n, err = strconv.ParseUint(string(v), 10, 64); err == nil {
			st.Seen[k[len(keySeen):]] = n
		}
	case strings.HasPrefix(k, keyPoison):
		var p Poison
		if err = loadJSON(v, &p); err == nil {
			if _, ok := st.Poisons[p.Seq]; !ok {
				st.poisonSeqs = insertSeq(st.poisonSeqs, p.Seq)
			}
			st.Poisons[p.Seq] = &p
		}
	case k == keyPoisonCount:
		st.PoisonCount, err = strconv.Atoi(string(v))
	case k == keyLeadership:
		var l Leadership
		if err = loadJSON(v, &l); err == nil {
			st.Leadership = &l
		}
	case strings.HasPrefix(k, keyPart):
		var p SubmittedPart
		if err = loadJSON(v, &p); err == nil {
			st.Parts[k[len(keyPart):]] = &p
		}
	case strings.HasPrefix(k, keyCooldown):
		var c Cooldown
		if err = loadJSON(v, &c); err == nil {
			st.Cooldowns[k[len(keyCooldown):]] = &c
		}
	case strings.HasPrefix(k, keyPlacement):
		var p Placement
		if err = loadJSON(v, &p); err == nil {
			st.Placements[k[len(keyPlacement):]] = &p
		}
	}
	if err != nil {
		return fmt.Errorf("projection: load record %q: %w", k, err)
	}
	return nil
}

// loadJSON decodes a record's JSON as encoding/json would (the v1
// options appendRecord encodes with), by the v2 implementation: by
// encoding/json, reopening the store of 10,000 finished tasks took 3.8 s
// instead of 2.1 (BenchmarkRefold's open_s, medians on a loaded machine).
func loadJSON(v []byte, p any) error { return jsonv2.Unmarshal(v, p, jsonv1.DefaultOptionsV1()) }

// encodeRecord encodes the record at key k, nil for a removed one.
func (st *State) encodeRecord(k string) ([]byte, error) { return st.appendRecord(nil, k) }

// appendRecord appends the encoding of the record at key k to b, and
// returns nil for a removed one.
func (st *State) appendRecord(b []byte, k string) ([]byte, error) {
	var v any
	switch {
	case strings.HasPrefix(k, keyFlow):
		if f := st.Flows[k[len(keyFlow):]]; f != nil {
			// Without its definition: fd/.
			g := *f
			g.Order, g.Spec = nil, flow.Spec{}
			v = &g
		}
	case strings.HasPrefix(k, keyFlowDef):
		if f := st.Flows[k[len(keyFlowDef):]]; f != nil {
			v = flowDefinition{ID: f.ID, Order: f.Order, Spec: f.Spec}
		}
	case strings.HasPrefix(k, keyTask):
		v = st.Tasks[k[len(keyTask):]]
	case strings.HasPrefix(k, keyAttempt):
		v = st.Attempts[k[len(keyAttempt):]]
	case strings.HasPrefix(k, keySeen):
		return strconv.AppendUint(b, st.Seen[k[len(keySeen):]], 10), nil
	case strings.HasPrefix(k, keyPoison):
		n, err := strconv.ParseUint(k[len(keyPoison):], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("projection: bad poison key %q: %w", k, err)
		}
		p := st.Poisons[n]
		if p == nil {
			return nil, nil // evicted by a newer one
		}
		v = p
	case k == keyPoisonCount:
		return strconv.AppendInt(b, int64(st.PoisonCount), 10), nil
	case k == keyLeadership:
		v = st.Leadership
	case strings.HasPrefix(k, keyPart):
		p := st.Parts[k[len(keyPart):]]
		if p == nil {
			return nil, nil
		}
		v = p
	case strings.HasPrefix(k, keyCooldown):
		v = st.Cooldowns[k[len(keyCooldown):]]
	case strings.HasPrefix(k, keyPlacement):
		v = st.Placements[k[len(keyPlacement):]]
	}
	w := appendWriter{b}
	if err := jsonv2.MarshalWrite(&w, v, jsonv1.DefaultOptionsV1()); err != nil {
		return nil, fmt.Errorf("projection: encode %s: %w", k, err)
	}
	return w.b, nil
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
