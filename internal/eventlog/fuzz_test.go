package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// maxFuzzMessages bounds the messages FuzzApplyRaw makes of one input; the
// last one takes the rest of the input, newlines and all.
const maxFuzzMessages = 128

// fuzzSeedLimit keeps the 1 MiB messages of the size tests out of the
// corpus: they make every mutation slow and test nothing new.
const fuzzSeedLimit = 64 << 10

// FuzzDecode checks that Decode never panics, that everything it refuses
// wraps ErrDecode, and that everything it accepts is a valid envelope that
// re-encodes and decodes to an equal event; and that DecodeForFold's one
// pass decodes exactly what Decode and Payload do (checkDecodeForFold).
func FuzzDecode(f *testing.F) {
	for _, msgs := range testdataStreams(f) {
		for _, m := range msgs {
			if len(m) <= fuzzSeedLimit {
				f.Add(m)
			}
		}
	}
	f.Add([]byte(`{"v":1,"id":"i","type":"t","flow":"f","time":"2025-01-01T00:00:00.5+05:30","data":{ "a" : "<&>" }}`))
	f.Add([]byte(`{"v":1,"id":"i","type":"t","flow":"f","data":null,"DATA":"x","Id":"j"}`))

	f.Add([]byte(`{"v":1,"data" : {"worker":"w"} ,"id":"i","type":"attempt_claimed","flow":"f"}`))
	f.Add([]byte(`{"v":1,"id":"i","type":"attempt_reported","flow":"f","data" :` + "\n" + ` {"success":true,"exit_code":"1"}}`))
	f.Add([]byte(`{"v":1,"id":"i","type":"runtime_terminated","flow":"f","data":{},"data":{}}`))

	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecodeForFold(t, raw)
		ev, err := Decode(raw)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		if len(raw) > MaxEventSize || ev.V != Version || ev.ID == "" || ev.Type == "" || ev.Flow == "" {
			t.Fatalf("accepted an invalid envelope (%d bytes): %+v", len(raw), ev)
		}
		enc, err := ev.Encode()
		if err != nil {
			t.Fatalf("accepted event does not encode: %v\n%+v", err, ev)
		}
		if len(enc) > MaxEventSize {
			// Encoding escapes <, > and & and replaces invalid UTF-8, so an
			// input just under the limit can come back over it.
			return
		}
		ev2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v\n%s", err, enc)
		}
		if ev.V != ev2.V || ev.ID != ev2.ID || ev.Type != ev2.Type || ev.Flow != ev2.Flow ||
			ev.Task != ev2.Task || ev.Attempt != ev2.Attempt || ev.Epoch != ev2.Epoch {
			t.Fatalf("round trip changed the envelope:\n%+v\n%+v", ev, ev2)
		}
		if !ev.Time.Equal(ev2.Time) || ev.Time.Format(time.RFC3339Nano) != ev2.Time.Format(time.RFC3339Nano) {
			t.Fatalf("round trip changed the time: %v -> %v", ev.Time, ev2.Time)
		}
		// Data is kept verbatim by Decode and compacted by Encode; compare
		// the compacted forms.
		d1, err1 := json.Marshal(ev.Data)
		d2, err2 := json.Marshal(ev2.Data)
		if err1 != nil || err2 != nil || !bytes.Equal(d1, d2) || (ev.Data == nil) != (ev2.Data == nil) {
			t.Fatalf("round trip changed the payload: %q -> %q (%v, %v)", ev.Data, ev2.Data, err1, err2)
		}
		// After one round the encoding is a fixed point.
		if enc2, err := ev2.Encode(); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

// checkDecodeForFold fails t unless DecodeForFold(raw) is what Decode and
// Payload make of it: the same verdict with the same reason, the same
// envelope, Data and payload.
func checkDecodeForFold(t *testing.T, raw []byte) {
	t.Helper()
	got, want := DecodeForFold(raw), decodeTwoPass(raw)
	if (got.err == nil) != (want.err == nil) || (got.err != nil && got.err.Error() != want.err.Error()) {
		t.Fatalf("DecodeForFold: error %v, two passes: %v", got.err, want.err)
	}
	if got.err != nil {
		return
	}
	g, w := *got.ev, *want.ev
	if (g.payloadErr == nil) != (w.payloadErr == nil) || (g.payloadErr != nil && g.payloadErr.Error() != w.payloadErr.Error()) {
		t.Fatalf("payload error %v, two passes: %v", g.payloadErr, w.payloadErr)
	}
	gp, err1 := json.Marshal(g.payload)
	wp, err2 := json.Marshal(w.payload)
	if fmt.Sprintf("%T", g.payload) != fmt.Sprintf("%T", w.payload) || err1 != nil || err2 != nil || !bytes.Equal(gp, wp) {
		t.Fatalf("payload %T %s, two passes: %T %s (%v, %v)", g.payload, gp, w.payload, wp, err1, err2)
	}
	g.payload, w.payload, g.payloadErr, w.payloadErr = nil, nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("event %+v, two passes: %+v", g, w)
	}
}

// FuzzApplyRaw folds arbitrary bytes: the whole input as one message at seq,
// and, on a fresh state, each line of it as a message at seq, seq+1, ... (so
// that the seeds, whole test streams, reach deep states). No input may panic
// the fold, and after every message:
//
//   - an undecodable message is poison at its sequence and changes nothing
//     else, and a decodable one whose id was seen changes nothing at all;
//   - whether a decodable message is poison depends on its bytes alone;
//   - a terminal flow or task does not change, nor does a terminal attempt
//     apart from its classified error, with two exceptions: an operator's
//     task_retry_requested reopens the task, the tasks it blocked and the
//     flow (a new round), and the result of a scheduled integration lands
//     on a flow that ended meanwhile;
//   - in a well-formed flow, no task that has not ended depends on one that
//     failed, was cancelled or is blocked (it would wait forever);
//   - every record is encodable, loads back to the same bytes, and what was
//     written for the touched records equals what memory holds (no
//     mutation escapes the dirty set);
//   - folding the same messages again, decoded ahead (DecodeForFold),
//     gives the same records;
//
// and the final state commits through a Store.
func FuzzApplyRaw(f *testing.F) {
	for _, msgs := range testdataStreams(f) {
		var kept [][]byte
		for _, m := range msgs {
			if len(m) <= fuzzSeedLimit && !bytes.Contains(m, []byte("\n")) {
				kept = append(kept, m)
			}
		}
		f.Add(uint64(1), bytes.Join(kept, []byte("\n")))
	}
	sc := &scenario{}
	sc.addDiamond(f, "t", diamondOpts{takeoverB: true, badPhase: true})
	sc.addDiamond(f, "f", diamondOpts{failA: true})
	var all [][]byte
	for _, n := range sc.nodes {
		all = append(all, n.raw)
	}
	f.Add(uint64(100), bytes.Join(all, []byte("\n")))
	// The policy and operator flows, one seed each (together they are
	// more messages than one input folds).
	policy := &scenario{}
	policy.addPolicyFlows(f, "")
	byFlow := map[string][][]byte{}
	var flows []string
	for _, n := range policy.nodes {
		if _, ok := byFlow[n.ev.Flow]; !ok {
			flows = append(flows, n.ev.Flow)
		}
		byFlow[n.ev.Flow] = append(byFlow[n.ev.Flow], n.raw)
	}
	for _, fid := range flows {
		if len(byFlow[fid]) > maxFuzzMessages {
			f.Fatalf("flow %s has %d messages, more than one fuzz input folds", fid, len(byFlow[fid]))
		}
		f.Add(uint64(200), bytes.Join(byFlow[fid], []byte("\n")))
	}
	f.Add(uint64(0), []byte("not json"))
	f.Add(^uint64(0), []byte(`{"v":1,"id":"x","type":"flow_submitted","flow":"f","data":{"spec":{"tasks":[{"id":"a"},{"id":"a","depends_on":["a","b"]}]}}}`))
	f.Add(uint64(1), []byte(`{"v":1,"id":"p1","type":"flow_tasks_submitted","flow":"f","data":{"part":1,"tasks":[{"id":"a","prompt":"x"}],"plan":{"a":{}}}}`))
	f.Add(uint64(2), []byte(`{"v":1,"id":"fs","type":"flow_submitted","flow":"f","data":{"spec":{"name":"f","repo":"/r"},"parts":1}}`))

	store := openMemStore(f, vfs.NewMem())
	f.Cleanup(func() { store.Close() })

	f.Fuzz(func(t *testing.T, seq uint64, data []byte) {
		whole := newCheckedFold(t)
		whole.apply(seq, data)
		whole.finish()

		// The checks after each message cost time in the size of the state,
		// so the number of messages is bounded to keep fuzzing fast.
		lines := bytes.SplitN(data, []byte("\n"), maxFuzzMessages)
		st := newCheckedFold(t)
		for i, m := range lines {
			st.apply(seq+uint64(i), m)
		}
		st.finish()
		// Again, decoded ahead as the controller's fold does.
		again := NewState()
		for i, m := range lines {
			again.applyDecoded(seq+uint64(i), DecodeForFold(m))
		}
		if !maps.Equal(memRecords(t, st.st), memRecords(t, again)) {
			t.Fatal("folding the same messages twice, the second time decoded ahead, gave different records")
		}

		// Commit everything through a real Store.
		for id := range st.st.Flows {
			st.st.mark(keyFlow + id)
		}
		for k := range st.st.Tasks {
			st.st.mark(keyTask + k)
		}
		for id := range st.st.Attempts {
			st.st.mark(keyAttempt + id)
		}
		for id := range st.st.Seen {
			st.st.mark(keySeen + id)
		}
		for seq := range st.st.Poisons {
			st.st.mark(poisonKey(seq))
		}
		for k := range st.st.Parts {
			st.st.mark(keyPart + k)
		}
		store.mu.Lock()
		store.st = st.st
		store.applied = store.durable + 1
		store.mu.Unlock()
		if err := store.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	})
}

// checkedFold folds messages into a State and checks the invariants listed
// on FuzzApplyRaw after each one. persisted plays the store: it holds what
// a Commit after each message would have written.
//
// To keep fuzzing fast the checks after each message look at the records
// the message could be about (its flow and all its tasks, its attempt and
// that attempt's task, its id, the poison at its sequence); finish compares
// the whole state with what was persisted.
type checkedFold struct {
	t         *testing.T
	st        *State
	persisted map[string]string
}

func newCheckedFold(t *testing.T) *checkedFold {
	return &checkedFold{t: t, st: NewState(), persisted: map[string]string{}}
}

// maxNeighborhood bounds how many tasks of a flow are checked per message.
const maxNeighborhood = 1000

func (c *checkedFold) neighborhood(seq uint64, ev *Event) []string {
	keys := []string{poisonKey(seq)}
	if ev == nil {
		return keys
	}
	keys = append(keys, keySeen+ev.ID, keyFlow+ev.Flow, keyTask+TaskKey(ev.Flow, ev.Task), keyAttempt+ev.Attempt)
	if f := c.st.Flows[ev.Flow]; f != nil && len(f.Order) <= maxNeighborhood {
		for _, id := range f.Order {
			keys = append(keys, keyTask+TaskKey(f.ID, id))
		}
	}
	if a := c.st.Attempts[ev.Attempt]; a != nil {
		keys = append(keys, keyTask+TaskKey(a.Flow, a.Task))
	}
	return keys
}

// recordsOf encodes the records among keys that exist.
func (c *checkedFold) recordsOf(keys []string) map[string]string {
	st := c.st
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		var ok bool
		switch {
		case strings.HasPrefix(k, keyFlow):
			_, ok = st.Flows[k[len(keyFlow):]]
		case strings.HasPrefix(k, keyTask):
			_, ok = st.Tasks[k[len(keyTask):]]
		case strings.HasPrefix(k, keyAttempt):
			_, ok = st.Attempts[k[len(keyAttempt):]]
		case strings.HasPrefix(k, keySeen):
			_, ok = st.Seen[k[len(keySeen):]]
		case strings.HasPrefix(k, keyPoison):
			_, ok = st.Poisons[mustParsePoisonKey(c.t, k)]
		case strings.HasPrefix(k, keyPart):
			_, ok = st.Parts[k[len(keyPart):]]
		}
		if !ok {
			continue
		}
		v, err := st.encodeRecord(k)
		if err != nil {
			c.t.Fatalf("encode %s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}

func (c *checkedFold) apply(seq uint64, msg []byte) {
	t, st := c.t, c.st
	ev, decErr := Decode(msg)
	dup := false
	if decErr == nil {
		_, dup = st.Seen[ev.ID]
	}
	keys := c.neighborhood(seq, ev)
	before := c.recordsOf(keys)

	st.ApplyRaw(seq, msg)

	keys = append(keys, c.neighborhood(seq, ev)...)
	after := c.recordsOf(keys)
	dirty := make(map[string]bool, len(st.dirty))
	for k := range st.dirty {
		dirty[k] = true
	}
	changed := diffRecords(before, after)
	for _, line := range changed {
		if k := line[2:]; !dirty[k] {
			t.Fatalf("seq %d: %s changed but was not marked dirty", seq, k)
		}
	}
	switch {
	case decErr != nil:
		if p := st.Poisons[seq]; p == nil || p.Size != len(msg) {
			t.Fatalf("seq %d: undecodable message (%v) is not poison: %+v", seq, decErr, p)
		}
		for k := range dirty {
			if k != poisonKey(seq) {
				t.Fatalf("seq %d: undecodable message touched %s", seq, k)
			}
		}
	case dup:
		if len(dirty) > 0 || len(changed) > 0 {
			t.Fatalf("seq %d: duplicate id %q changed %v", seq, ev.ID, changed)
		}
	}

	// Terminal records stay put, but for what an operator's retry reopens
	// and an integration result that lands after its flow ended.
	var typ Type
	if ev != nil {
		typ = ev.Type
	}
	for _, line := range changed {
		k := line[2:]
		old, ok := before[k]
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, keyFlow):
			var f, g Flow
			mustUnmarshal(t, old, &f)
			mustUnmarshal(t, after[k], &g)
			if !f.State.Terminal() {
				continue
			}
			switch {
			case typ == TaskRetryRequested:
				if g.State != FlowRunning || !g.CompletedAt.IsZero() || g.Round != f.Round+1 {
					t.Fatalf("seq %d: a retry reopened a flow wrongly:\n%s\n%s", seq, old, after[k])
				}
				f.State, f.CompletedAt, f.Round = g.State, g.CompletedAt, g.Round
			case typ == FlowIntegrated && f.Integration != nil && f.Integration.State == IntegrationScheduledSt &&
				g.Integration != nil && g.Integration.N == f.Integration.N && g.Integration.State != IntegrationScheduledSt:
				// The result of the integration the flow had scheduled.
				f.Integration = g.Integration
			}
			if !sameJSON(f, g) {
				t.Fatalf("seq %d: terminal flow changed:\n%s\n%s", seq, old, after[k])
			}
		case strings.HasPrefix(k, keyTask):
			var task, got Task
			mustUnmarshal(t, old, &task)
			mustUnmarshal(t, after[k], &got)
			if !task.State.Terminal() {
				continue
			}
			switch {
			case typ != TaskRetryRequested:
				t.Fatalf("seq %d: terminal task changed:\n%s\n%s", seq, old, after[k])
			case task.ID == ev.Task:
				// The retried task: pending, with a fresh budget.
				if (task.State != TaskFailed && task.State != TaskCancelled) || got.State != TaskPending ||
					got.Round != task.Round+1 || got.RetryBase != task.Attempts || got.Error != nil || got.CancelRequested {
					t.Fatalf("seq %d: a retry reopened its task wrongly:\n%s\n%s", seq, old, after[k])
				}
			default:
				// A task it blocked: waiting again, or blocked by another failure.
				if task.State != TaskBlocked || task.BlockedBy != ev.Task ||
					(got.State != TaskPending && got.State != TaskBlocked) || got.BlockedBy == ev.Task {
					t.Fatalf("seq %d: a retry of %s changed another terminal task:\n%s\n%s", seq, ev.Task, old, after[k])
				}
			}
		case strings.HasPrefix(k, keyAttempt):
			var a, b Attempt
			mustUnmarshal(t, old, &a)
			mustUnmarshal(t, after[k], &b)
			if a.State.Terminal() {
				a.Error, b.Error = nil, nil
				if !sameJSON(a, b) {
					t.Fatalf("seq %d: terminal attempt changed beyond its error:\n%s\n%s", seq, old, after[k])
				}
			}
		}
	}

	// In a well-formed flow no task waits on a dependency that will never
	// succeed without an operator: it is blocked too.
	if ev != nil {
		if f := st.Flows[ev.Flow]; f != nil && len(f.Order) <= maxNeighborhood {
			checkNotStuck(t, seq, st, f)
		}
	}

	// Whether a decodable event is poison depends on its bytes alone: on a
	// fresh state, where it is about nothing, it is poison just the same.
	if decErr == nil && !dup {
		fresh := NewState().Apply(seq, ev) != nil
		if poisoned := st.Poisons[seq] != nil; poisoned != fresh {
			t.Fatalf("seq %d: poison here %t, on a fresh state %t: %s", seq, poisoned, fresh, msg)
		}
	}

	// Persist the dirty records, as Commit does, and check they load back.
	for k := range dirty {
		v, err := st.encodeRecord(k)
		if err != nil {
			t.Fatalf("seq %d: encode %s: %v", seq, k, err)
		}
		if v == nil { // removed by the fold (a folded-in part)
			delete(c.persisted, k)
			continue
		}
		loaded := NewState()
		if err := loaded.loadRecord(k, v); err != nil {
			t.Fatalf("seq %d: load %s: %v\n%s", seq, k, err, v)
		}
		if v2 := memRecords(t, loaded)[k]; v2 != string(v) {
			t.Fatalf("seq %d: %s does not survive a load:\n%s\n%s", seq, k, v, v2)
		}
		c.persisted[k] = string(v)
	}
	clear(st.dirty)
	for k, v := range after {
		if c.persisted[k] != v {
			t.Fatalf("seq %d: memory holds %s = %s, but what was persisted is %s", seq, k, v, c.persisted[k])
		}
	}
}

// finish checks that what was persisted is the whole state.
func (c *checkedFold) finish() {
	if d := diffRecords(c.persisted, memRecords(c.t, c.st)); len(d) > 0 {
		c.t.Fatalf("the persisted records differ from memory: %v", d)
	}
}

func mustParsePoisonKey(t *testing.T, k string) uint64 {
	n, err := strconv.ParseUint(k[len(keyPoison):], 10, 64)
	if err != nil {
		t.Fatalf("poison key %q: %v", k, err)
	}
	return n
}

// checkNotStuck fails if a task of f that has not ended depends on one that
// failed, was cancelled or is blocked. It only looks at flows whose tasks
// have unique ids and known dependencies, and whose Order lists each task
// after its dependencies (a spec that passed validation).
func checkNotStuck(t *testing.T, seq uint64, st *State, f *Flow) {
	pos := make(map[string]int, len(f.Order))
	for i, id := range f.Order {
		pos[id] = i
	}
	if len(pos) != len(f.Order) || len(f.Spec.Tasks) != len(f.Order) {
		return
	}
	for _, task := range f.Spec.Tasks {
		for _, dep := range task.DependsOn {
			if p, ok := pos[dep]; !ok || p >= pos[task.ID] {
				return
			}
		}
	}
	for _, task := range st.FlowTasks(f) {
		if task.State.Terminal() {
			continue
		}
		for _, dep := range task.DependsOn {
			if d := st.Task(f.ID, dep); d != nil && (d.State == TaskFailed || d.State == TaskCancelled || d.State == TaskBlocked) {
				t.Fatalf("seq %d: task %s/%s is %s but its dependency %s is %s", seq, f.ID, task.ID, task.State, dep, d.State)
			}
		}
	}
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("unmarshal %s: %v", s, err)
	}
}
