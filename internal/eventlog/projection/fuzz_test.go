package projection_test

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

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"

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
	for _, msgs := range foldtest.TestdataStreams(f, "testdata/fold") {
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
		ev, err := event.Decode(raw)
		if err != nil {
			if !errors.Is(err, event.ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		if len(raw) > event.MaxEventSize || ev.V != event.Version || ev.ID == "" || ev.Type == "" || ev.Flow == "" {
			t.Fatalf("accepted an invalid envelope (%d bytes): %+v", len(raw), ev)
		}
		enc, err := ev.Encode()
		if err != nil {
			t.Fatalf("accepted event does not encode: %v\n%+v", err, ev)
		}
		if len(enc) > event.MaxEventSize {
			// Encoding escapes <, > and & and replaces invalid UTF-8, so an
			// input just under the limit can come back over it.
			return
		}
		ev2, err := event.Decode(enc)
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

// checkDecodeForFold fails t unless DecodeForFold(foldtest.Subject(raw), raw) is what Decode and
// Payload make of it: the same verdict with the same reason, the same
// envelope, Data and payload.
func checkDecodeForFold(t *testing.T, raw []byte) {
	t.Helper()
	gev, gp, gperr, gerr := projection.DecodeForFold(foldtest.Subject(raw), raw).Parts()
	wev, wp, wperr, werr := projection.DecodeTwoPass(foldtest.Subject(raw), raw).Parts()
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("DecodeForFold: error %v, two passes: %v", gerr, werr)
	}
	if gerr != nil {
		return
	}
	if (gperr == nil) != (wperr == nil) || (gperr != nil && gperr.Error() != wperr.Error()) {
		t.Fatalf("payload error %v, two passes: %v", gperr, wperr)
	}
	gj, err1 := json.Marshal(gp)
	wj, err2 := json.Marshal(wp)
	if fmt.Sprintf("%T", gp) != fmt.Sprintf("%T", wp) || err1 != nil || err2 != nil || !bytes.Equal(gj, wj) {
		t.Fatalf("payload %T %s, two passes: %T %s (%v, %v)", gp, gj, wp, wj, err1, err2)
	}
	if !reflect.DeepEqual(*gev, *wev) {
		t.Fatalf("event %+v, two passes: %+v", *gev, *wev)
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
	for _, msgs := range foldtest.TestdataStreams(f, "testdata/fold") {
		var kept [][]byte
		for _, m := range msgs {
			if len(m) <= fuzzSeedLimit && !bytes.Contains(m, []byte("\n")) {
				kept = append(kept, m)
			}
		}
		f.Add(uint64(1), bytes.Join(kept, []byte("\n")))
	}
	sc := &foldtest.Scenario{}
	sc.AddDiamond(f, "t", foldtest.DiamondOpts{TakeoverB: true, BadPhase: true})
	sc.AddDiamond(f, "f", foldtest.DiamondOpts{FailA: true})
	var all [][]byte
	for _, n := range sc.Nodes {
		all = append(all, n.Raw)
	}
	f.Add(uint64(100), bytes.Join(all, []byte("\n")))
	// The policy and operator flows, one seed each (together they are
	// more messages than one input folds).
	policy := &foldtest.Scenario{}
	policy.AddPolicyFlows(f, "")
	byFlow := map[string][][]byte{}
	var flows []string
	for _, n := range policy.Nodes {
		if _, ok := byFlow[n.Ev.Flow]; !ok {
			flows = append(flows, n.Ev.Flow)
		}
		byFlow[n.Ev.Flow] = append(byFlow[n.Ev.Flow], n.Raw)
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
		again := projection.NewState()
		for i, m := range lines {
			again.ApplyDecoded(seq+uint64(i), projection.DecodeForFold(foldtest.Subject(m), m))
		}
		if !maps.Equal(foldtest.MemRecords(t, st.st), foldtest.MemRecords(t, again)) {
			t.Fatal("folding the same messages twice, the second time decoded ahead, gave different records")
		}

		// Commit everything through a real Store, and load it back. A
		// store folds sequences from 1 on, once each.
		if seq == 0 || seq+uint64(len(lines)) < seq {
			return
		}
		fs := vfs.NewMem()
		s := foldtest.OpenMemStore(t, fs)
		for i, m := range lines {
			s.Stage(seq+uint64(i), foldtest.Subject(m), m)
		}
		if err := s.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		foldtest.CheckPersisted(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = foldtest.OpenMemStore(t, fs)
		defer s.Close()
		var loaded map[string]string
		s.Read(func(ls *projection.State) { loaded = foldtest.MemRecords(t, ls) })
		if d := foldtest.DiffRecords(foldtest.MemRecords(t, st.st), loaded); len(d) > 0 {
			t.Fatalf("the store loaded back other records than the fold made: %v", d)
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
	st        *projection.State
	persisted map[string]string
}

func newCheckedFold(t *testing.T) *checkedFold {
	return &checkedFold{t: t, st: projection.NewState(), persisted: map[string]string{}}
}

// maxNeighborhood bounds how many tasks of a flow are checked per message.
const maxNeighborhood = 1000

func (c *checkedFold) neighborhood(seq uint64, ev *event.Event) []string {
	keys := []string{projection.PoisonKey(seq)}
	if ev == nil {
		return keys
	}
	keys = append(keys, projection.KeySeen+ev.ID, projection.KeyFlow+ev.Flow, projection.KeyFlowDef+ev.Flow, projection.KeyTask+projection.TaskKey(ev.Flow, ev.Task), projection.KeyAttempt+ev.Attempt)
	if f := c.st.Flows[ev.Flow]; f != nil && len(f.Order) <= maxNeighborhood {
		for _, id := range f.Order {
			keys = append(keys, projection.KeyTask+projection.TaskKey(f.ID, id))
		}
	}
	if a := c.st.Attempts[ev.Attempt]; a != nil {
		keys = append(keys, projection.KeyTask+projection.TaskKey(a.Flow, a.Task))
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
		case strings.HasPrefix(k, projection.KeyFlow):
			_, ok = st.Flows[k[len(projection.KeyFlow):]]
		case strings.HasPrefix(k, projection.KeyFlowDef):
			_, ok = st.Flows[k[len(projection.KeyFlowDef):]]
		case strings.HasPrefix(k, projection.KeyTask):
			_, ok = st.Tasks[k[len(projection.KeyTask):]]
		case strings.HasPrefix(k, projection.KeyAttempt):
			_, ok = st.Attempts[k[len(projection.KeyAttempt):]]
		case strings.HasPrefix(k, projection.KeySeen):
			_, ok = st.Seen[k[len(projection.KeySeen):]]
		case strings.HasPrefix(k, projection.KeyPoison):
			_, ok = st.Poisons[mustParsePoisonKey(c.t, k)]
		case strings.HasPrefix(k, projection.KeyPart):
			_, ok = st.Parts[k[len(projection.KeyPart):]]
		}
		if !ok {
			continue
		}
		v, err := st.EncodeRecord(k)
		if err != nil {
			c.t.Fatalf("encode %s: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}

func (c *checkedFold) apply(seq uint64, msg []byte) {
	t, st := c.t, c.st
	ev, decErr := event.Decode(msg)
	dup := false
	if decErr == nil {
		_, dup = st.Seen[ev.ID]
	}
	keys := c.neighborhood(seq, ev)
	before := c.recordsOf(keys)

	st.ApplyRaw(seq, foldtest.Subject(msg), msg)

	keys = append(keys, c.neighborhood(seq, ev)...)
	after := c.recordsOf(keys)
	dirty := make(map[string]bool, len(st.Dirty()))
	for k := range st.Dirty() {
		dirty[k] = true
	}
	changed := foldtest.DiffRecords(before, after)
	for _, line := range changed {
		if k := line[2:]; !dirty[k] {
			t.Fatalf("seq %d: %s changed but was not marked dirty", seq, k)
		}
	}
	poisoned := st.Poisons[seq] != nil
	switch {
	case decErr != nil && !poisoned:
		t.Fatalf("seq %d: undecodable message (%v) is not poison", seq, decErr)
	case poisoned:
		// Poison changes nothing but the poison records: not even the
		// ids seen.
		if p := st.Poisons[seq]; p.Size != len(msg) || len(p.Reason) > 512 {
			t.Fatalf("seq %d: poison %+v of a message of %d bytes", seq, p, len(msg))
		}
		for k := range dirty {
			if !strings.HasPrefix(k, projection.KeyPoison) && k != projection.KeyPoisonCount {
				t.Fatalf("seq %d: poison touched %s", seq, k)
			}
		}
		if decErr == nil && !dup {
			if _, seen := st.Seen[ev.ID]; seen {
				t.Fatalf("seq %d: poison marked its id %q seen", seq, ev.ID)
			}
		}
	case dup:
		if len(dirty) > 0 || len(changed) > 0 {
			t.Fatalf("seq %d: duplicate id %q changed %v", seq, ev.ID, changed)
		}
	}

	// Terminal records stay put, but for what an operator's retry reopens
	// and an integration result that lands after its flow ended.
	var typ event.Type
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
		case strings.HasPrefix(k, projection.KeyFlow):
			var f, g projection.Flow
			mustUnmarshal(t, old, &f)
			mustUnmarshal(t, after[k], &g)
			if !f.State.Terminal() {
				continue
			}
			switch {
			case typ == event.TaskRetryRequested:
				if g.State != drovertype.FlowRunning || !g.CompletedAt.IsZero() || g.Round != f.Round+1 {
					t.Fatalf("seq %d: a retry reopened a flow wrongly:\n%s\n%s", seq, old, after[k])
				}
				f.State, f.CompletedAt, f.Round = g.State, g.CompletedAt, g.Round
			case typ == event.FlowIntegrated && f.Integration != nil && f.Integration.State == drovertype.IntegrationScheduled &&
				g.Integration != nil && g.Integration.N == f.Integration.N && g.Integration.State != drovertype.IntegrationScheduled:
				// The result of the integration the flow had scheduled
				// (and, on its pull request's branch, what that holds).
				f.Integration, f.PR = g.Integration, g.PR
			case typ == event.ReviewRoundStarted:
				// A review round reopens the flow with its tasks.
				if g.State != drovertype.FlowRunning || !g.CompletedAt.IsZero() || g.Round != f.Round+1 || !grew(before, after, projection.KeyFlowDef+f.ID) {
					t.Fatalf("seq %d: a review round reopened a flow wrongly:\n%s\n%s", seq, old, after[k])
				}
				f.State, f.CompletedAt, f.Round, f.PR = g.State, g.CompletedAt, g.Round, g.PR
			case typ == event.PullRequestRequested || typ == event.PullRequestPublished || typ == event.PullRequestObserved ||
				typ == event.PullRequestFeedback:
				// What an ended flow's pull request is and says.
				f.PR = g.PR
			}
			if !sameJSON(f, g) {
				t.Fatalf("seq %d: terminal flow changed:\n%s\n%s", seq, old, after[k])
			}
		case strings.HasPrefix(k, projection.KeyTask):
			var task, got projection.Task
			mustUnmarshal(t, old, &task)
			mustUnmarshal(t, after[k], &got)
			if !task.State.Terminal() {
				continue
			}
			switch {
			case typ != event.TaskRetryRequested:
				t.Fatalf("seq %d: terminal task changed:\n%s\n%s", seq, old, after[k])
			case task.ID == ev.Task:
				// The retried task: pending, with a fresh budget.
				if (task.State != drovertype.TaskFailed && task.State != drovertype.TaskCancelled) || got.State != drovertype.TaskPending ||
					got.Round != task.Round+1 || got.RetryBase != task.Attempts || got.Error != nil || got.CancelRequested {
					t.Fatalf("seq %d: a retry reopened its task wrongly:\n%s\n%s", seq, old, after[k])
				}
			default:
				// A task it blocked: waiting again, or blocked by another failure.
				if task.State != drovertype.TaskBlocked || task.BlockedBy != ev.Task ||
					(got.State != drovertype.TaskPending && got.State != drovertype.TaskBlocked) || got.BlockedBy == ev.Task {
					t.Fatalf("seq %d: a retry of %s changed another terminal task:\n%s\n%s", seq, ev.Task, old, after[k])
				}
			}
		case strings.HasPrefix(k, projection.KeyAttempt):
			var a, b projection.Attempt
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

	// An event that disagrees with itself is poison whatever the state:
	// on a fresh state, where it is about nothing, it is malformed just
	// the same. (An event that contradicts the state depends on it.)
	if decErr == nil && !dup {
		ferr := projection.NewState().Apply(seq, ev)
		if self := errors.Is(ferr, projection.ErrMalformed) || errors.Is(ferr, event.ErrDecode); self && !poisoned {
			t.Fatalf("seq %d: malformed on a fresh state (%v), folded here: %s", seq, ferr, msg)
		}
	}

	// Persist the dirty records, as Commit does, and check they load back.
	for k := range dirty {
		v, err := st.EncodeRecord(k)
		if err != nil {
			t.Fatalf("seq %d: encode %s: %v", seq, k, err)
		}
		if v == nil { // removed by the fold (a folded-in part)
			delete(c.persisted, k)
			continue
		}
		loaded := projection.NewState()
		if err := loaded.LoadRecord(k, v); err != nil {
			t.Fatalf("seq %d: load %s: %v\n%s", seq, k, err, v)
		}
		if v2 := foldtest.MemRecords(t, loaded)[k]; v2 != string(v) {
			t.Fatalf("seq %d: %s does not survive a load:\n%s\n%s", seq, k, v, v2)
		}
		c.persisted[k] = string(v)
	}
	st.ForgetChanges()
	for k, v := range after {
		if c.persisted[k] != v {
			t.Fatalf("seq %d: memory holds %s = %s, but what was persisted is %s", seq, k, v, c.persisted[k])
		}
	}
}

// finish checks that what was persisted is the whole state.
func (c *checkedFold) finish() {
	if d := foldtest.DiffRecords(c.persisted, foldtest.MemRecords(c.t, c.st)); len(d) > 0 {
		c.t.Fatalf("the persisted records differ from memory: %v", d)
	}
}

func mustParsePoisonKey(t *testing.T, k string) uint64 {
	n, err := strconv.ParseUint(k[len(projection.KeyPoison):], 10, 64)
	if err != nil {
		t.Fatalf("poison key %q: %v", k, err)
	}
	return n
}

// checkNotStuck fails if a task of f that has not ended depends on one that
// failed, was cancelled or is blocked. It only looks at flows whose tasks
// have unique ids and known dependencies, and whose Order lists each task
// after its dependencies (a spec that passed validation).
func checkNotStuck(t *testing.T, seq uint64, st *projection.State, f *projection.Flow) {
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
			if d := st.Task(f.ID, dep); d != nil && (d.State == drovertype.TaskFailed || d.State == drovertype.TaskCancelled || d.State == drovertype.TaskBlocked) {
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

// grew reports whether the flow definition at key k holds more tasks after
// than before: a review round adds its tasks to the flow's order.
func grew(before, after map[string]string, k string) bool {
	var b, a struct {
		Order []string `json:"order"`
	}
	if raw, ok := before[k]; ok {
		if json.Unmarshal([]byte(raw), &b) != nil {
			return false
		}
	}
	raw, ok := after[k]
	return ok && json.Unmarshal([]byte(raw), &a) == nil && len(a.Order) > len(b.Order)
}
