package eventlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	yaml "go.yaml.in/yaml/v3"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// This file holds the helpers the fold, store, property and fuzz tests share.

// baseTime is the clock of the test streams: by default the event at stream
// sequence n happens at baseTime + n seconds.
var baseTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func timeAt(seq uint64) time.Time { return baseTime.Add(time.Duration(seq) * time.Second) }

// encodeEvent builds and encodes one event, failing the test on error.
func encodeEvent(tb testing.TB, id string, typ Type, at time.Time, flowID, task, attempt string, epoch uint64, data any) []byte {
	tb.Helper()
	ev, err := New(id, typ, at, flowID, task, attempt, epoch, data)
	if err != nil {
		tb.Fatalf("new event: %v", err)
	}
	raw, err := ev.Encode()
	if err != nil {
		tb.Fatalf("encode event: %v", err)
	}
	return raw
}

// defaultID mirrors the ids the controller and the workers use: decisions are
// "type:attempt" (or "type:flow"), worker events "type:attempt:epoch", and a
// keyed worker event (file_modified) appends its key.
func defaultID(typ Type, flowID, attempt string, epoch uint64, key string) string {
	id := string(typ) + ":" + flowID
	if attempt != "" {
		id = string(typ) + ":" + attempt
	}
	if epoch > 0 {
		id += ":" + strconv.FormatUint(epoch, 10)
	}
	if key != "" {
		id += ":" + key
	}
	return id
}

// message is one message of a test stream, built from a datadriven directive.
type message struct {
	seq    uint64 // 0: the next sequence
	raw    []byte
	commit bool
}

// buildMessage turns a submit, event or raw directive into the bytes of one
// stream message. next is the sequence the message gets unless seq= says
// otherwise; it also sets the default event time.
func buildMessage(tb testing.TB, d *datadriven.TestData, next uint64) message {
	tb.Helper()
	m := message{commit: !d.HasArg("nocommit")}
	if d.HasArg("seq") {
		d.ScanArgs(tb, "seq", &m.seq)
	}
	seq := next
	if m.seq != 0 {
		seq = m.seq
	}
	at := timeAt(seq)
	if d.HasArg("time") {
		var s string
		d.ScanArgs(tb, "time", &s)
		var err error
		if at, err = time.Parse(time.RFC3339Nano, s); err != nil {
			tb.Fatalf("%s: time: %v", d.Pos, err)
		}
	}
	str := func(key string) string {
		var s string
		d.MaybeScanArgs(tb, key, &s)
		return s
	}

	switch d.Cmd {
	case "submit":
		flowID := str("flow")
		var spec flow.Spec
		dec := yaml.NewDecoder(strings.NewReader(d.Input))
		dec.KnownFields(true)
		if err := dec.Decode(&spec); err != nil {
			tb.Fatalf("%s: spec: %v", d.Pos, err)
		}
		id := str("id")
		if id == "" {
			id = defaultID(FlowSubmitted, flowID, "", 0, "")
		}
		m.raw = encodeEvent(tb, id, FlowSubmitted, at, flowID, "", "", 0, FlowSubmittedData{Spec: spec})

	case "event":
		typ := Type(str("type"))
		flowID, task, attempt, key := str("flow"), str("task"), str("attempt"), str("key")
		var epoch uint64
		if d.HasArg("epoch") {
			d.ScanArgs(tb, "epoch", &epoch)
		}
		id := str("id")
		if id == "" {
			id = defaultID(typ, flowID, attempt, epoch, key)
		}
		ev, err := New(id, typ, at, flowID, task, attempt, epoch, nil)
		if err != nil {
			tb.Fatalf("%s: %v", d.Pos, err)
		}
		if d.HasArg("v") {
			d.ScanArgs(tb, "v", &ev.V)
		}
		if in := strings.TrimSpace(d.Input); in != "" {
			ev.Data = json.RawMessage(in)
		}
		if m.raw, err = ev.Encode(); err != nil {
			tb.Fatalf("%s: encode: %v", d.Pos, err)
		}

	case "raw":
		switch {
		case d.HasArg("size"):
			// An otherwise valid flow submission padded to exactly size bytes.
			var size int
			d.ScanArgs(tb, "size", &size)
			head := `{"v":1,"id":"big","type":"flow_submitted","flow":"big","data":{"spec":{"name":"big","tasks":[]},"pad":"`
			tail := `"}}`
			if size < len(head)+len(tail) {
				tb.Fatalf("%s: size %d too small", d.Pos, size)
			}
			m.raw = []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
		case d.HasArg("quoted"):
			s, err := strconv.Unquote(strings.TrimSpace(d.Input))
			if err != nil {
				tb.Fatalf("%s: quoted input: %v", d.Pos, err)
			}
			m.raw = []byte(s)
		default:
			m.raw = []byte(d.Input)
		}
	default:
		tb.Fatalf("%s: not a message: %s", d.Pos, d.Cmd)
	}
	return m
}

// records reads every record of r.
func records(tb testing.TB, r Reader) map[string]string {
	tb.Helper()
	it, err := r.NewIter(nil)
	if err != nil {
		tb.Fatalf("iter: %v", err)
	}
	defer it.Close()
	out := map[string]string{}
	for it.First(); it.Valid(); it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	if err := it.Error(); err != nil {
		tb.Fatalf("iter: %v", err)
	}
	return out
}

// memRecords encodes every record of an in-memory state the way Commit
// would. It does not include m/applied.
func memRecords(tb testing.TB, st *State) map[string]string {
	tb.Helper()
	var keys []string
	for id := range st.Flows {
		keys = append(keys, keyFlow+id)
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
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := st.encodeRecord(k)
		if err != nil {
			tb.Fatalf("encode %q: %v", k, err)
		}
		out[k] = string(v)
	}
	return out
}

// diffRecords lists the keys that differ between two record sets, marked
// + (added), ~ (changed) or - (removed).
func diffRecords(before, after map[string]string) []string {
	var out []string
	for k, v := range after {
		if old, ok := before[k]; !ok {
			out = append(out, "+ "+k)
		} else if old != v {
			out = append(out, "~ "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, "- "+k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	return out
}

// checkPersisted fails unless the store's records are exactly what its
// in-memory state encodes to, with the applied sequence beside them. It only
// holds when nothing is staged but uncommitted.
func checkPersisted(tb testing.TB, s *Store) {
	tb.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.applied != s.durable {
		return
	}
	disk := records(tb, s.db)
	applied, ok := disk[keyApplied]
	delete(disk, keyApplied)
	switch {
	case s.durable == 0 && !ok:
	case applied != strconv.FormatUint(s.durable, 10):
		tb.Fatalf("m/applied is %q, want %d", applied, s.durable)
	}
	mem := memRecords(tb, s.st)
	if d := diffRecords(disk, mem); len(d) > 0 {
		var b strings.Builder
		for _, line := range d {
			k := line[2:]
			fmt.Fprintf(&b, "%s\n  store:  %s\n  memory: %s\n", line, disk[k], mem[k])
		}
		tb.Fatalf("store and memory disagree (a mutation not marked dirty?):\n%s", b.String())
	}
}

func openMemStore(tb testing.TB, fs vfs.FS) *Store {
	tb.Helper()
	s, err := OpenStore("db", StoreOptions{FS: fs})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	return s
}

// foldStream folds a stream (sequence -> message) into a fresh in-memory
// store in one batch, the way `controller rebuild` does.
func foldStream(tb testing.TB, stream map[uint64][]byte, upTo uint64) *Store {
	tb.Helper()
	s := openMemStore(tb, vfs.NewMem())
	for _, seq := range slices.Sorted(maps.Keys(stream)) {
		if seq > upTo {
			break
		}
		s.Stage(seq, stream[seq])
	}
	if err := s.Commit(); err != nil {
		tb.Fatalf("commit: %v", err)
	}
	return s
}

func compareStores(tb testing.TB, what string, a, b *Store) {
	tb.Helper()
	diffs, err := Compare(a.db, b.db, 20)
	if err != nil {
		tb.Fatalf("%s: compare: %v", what, err)
	}
	if len(diffs) > 0 {
		tb.Fatalf("%s: stores differ:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// foldHarness runs the datadriven fold tests against a Store on an
// in-memory filesystem.
type foldHarness struct {
	t      *testing.T
	fs     vfs.FS
	store  *Store
	last   uint64            // highest sequence delivered
	stream map[uint64][]byte // what the stream holds at each sequence
}

func newFoldHarness(t *testing.T) *foldHarness {
	h := &foldHarness{t: t, fs: vfs.NewMem(), stream: map[uint64][]byte{}}
	h.store = openMemStore(t, h.fs)
	t.Cleanup(func() {
		if err := h.store.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func (h *foldHarness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "submit", "event", "raw":
		m := buildMessage(t, d, h.last+1)
		if m.seq == 0 {
			m.seq = h.last + 1
		}
		return h.deliver(t, m)
	case "redeliver":
		var seq uint64
		d.ScanArgs(t, "seq", &seq)
		raw, ok := h.stream[seq]
		if !ok {
			t.Fatalf("%s: nothing at seq %d", d.Pos, seq)
		}
		return h.deliver(t, message{seq: seq, raw: raw, commit: true})
	case "commit":
		before := records(t, h.store.db)
		if err := h.store.Commit(); err != nil {
			return "error: " + err.Error()
		}
		checkPersisted(t, h.store)
		return h.changes(t, before, "commit")
	case "reopen":
		// A restart: whatever was staged but not committed is lost.
		if err := h.store.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		h.store = openMemStore(t, h.fs)
		checkPersisted(t, h.store)
		return fmt.Sprintf("applied=%d", h.store.Applied())
	case "state":
		var out string
		h.store.Read(func(st *State) { out = renderState(st) })
		return out
	case "dump":
		var prefix string
		d.MaybeScanArgs(t, "prefix", &prefix)
		var b strings.Builder
		recs := records(t, h.store.db)
		for _, k := range slices.Sorted(maps.Keys(recs)) {
			if strings.HasPrefix(k, prefix) {
				fmt.Fprintf(&b, "%s = %s\n", k, recs[k])
			}
		}
		return b.String()
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		return ""
	}
}

func (h *foldHarness) deliver(t *testing.T, m message) string {
	before := records(t, h.store.db)
	if !h.store.Stage(m.seq, m.raw) {
		return fmt.Sprintf("seq %d: skipped (redelivery)", m.seq)
	}
	if old, ok := h.stream[m.seq]; ok && !bytes.Equal(old, m.raw) {
		t.Fatalf("seq %d folded twice with different bytes: the test stream is inconsistent", m.seq)
	}
	h.stream[m.seq] = m.raw
	h.last = max(h.last, m.seq)
	if !m.commit {
		return fmt.Sprintf("seq %d: staged", m.seq)
	}
	if err := h.store.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	checkPersisted(t, h.store)
	out := h.changes(t, before, fmt.Sprintf("seq %d", m.seq))
	h.store.Read(func(st *State) {
		if p := st.Poisons[m.seq]; p != nil {
			out += fmt.Sprintf("\npoison: %s", p.Reason)
		}
	})
	return out
}

func (h *foldHarness) changes(t *testing.T, before map[string]string, what string) string {
	after := records(t, h.store.db)
	delete(before, keyApplied)
	delete(after, keyApplied)
	d := diffRecords(before, after)
	if len(d) == 0 {
		return what + ": no change"
	}
	return what + "\n" + strings.Join(d, "\n")
}

// finish checks what must hold at the end of every fold test: folding the
// whole stream in one batch gives the same store (what `controller rebuild`
// compares), and a restart loads exactly what was committed.
func (h *foldHarness) finish(t *testing.T) {
	if err := h.store.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	rebuilt := foldStream(t, h.stream, h.store.Applied())
	defer rebuilt.Close()
	compareStores(t, "live vs rebuilt", h.store, rebuilt)

	var before string
	h.store.Read(func(st *State) { before = renderState(st) })
	if err := h.store.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	h.store = openMemStore(t, h.fs)
	checkPersisted(t, h.store)
	var after string
	h.store.Read(func(st *State) { after = renderState(st) })
	if before != after {
		t.Fatalf("state changed across a reopen:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// renderState prints a state for people: flows with their tasks in
// dependency order, then attempts, poison and the number of ids seen.
// Times are shown as seconds after baseTime.
func renderState(st *State) string {
	var b strings.Builder
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := t.Sub(baseTime)
		if d%time.Second == 0 {
			return fmt.Sprintf("%ds", d/time.Second)
		}
		return d.String()
	}
	for _, id := range slices.Sorted(maps.Keys(st.Flows)) {
		f := st.Flows[id]
		fmt.Fprintf(&b, "flow %s: %s submitted=%s", f.ID, f.State, ts(f.SubmittedAt))
		if !f.CompletedAt.IsZero() {
			fmt.Fprintf(&b, " completed=%s", ts(f.CompletedAt))
		}
		if f.MaxParallel > 0 {
			fmt.Fprintf(&b, " max_parallel=%d", f.MaxParallel)
		}
		if f.Round > 0 {
			fmt.Fprintf(&b, " round=%d", f.Round)
		}
		if f.Paused {
			b.WriteString(" paused")
		}
		fmt.Fprintf(&b, " order=[%s]\n", strings.Join(f.Order, " "))
		if c := f.Cancel; c != nil {
			fmt.Fprintf(&b, "  cancel: at=%s reason=%q\n", ts(c.At), c.Reason)
		}
		if in := f.Integration; in != nil {
			fmt.Fprintf(&b, "  integration #%d: %s branch=%s runtime=%s pool=%s", in.N, in.State, in.Branch, in.Runtime, in.Pool)
			for _, m := range in.Merge {
				fmt.Fprintf(&b, " merge=%s:%s@%s", m.Task, m.Branch, m.Commit)
			}
			if in.Commit != "" {
				fmt.Fprintf(&b, " commit=%s", in.Commit)
			}
			if in.Error != nil {
				fmt.Fprintf(&b, " error=%s", renderError(in.Error))
			}
			b.WriteString("\n")
		}
		for _, t := range st.FlowTasks(f) {
			fmt.Fprintf(&b, "  task %s: %s runtime=%s attempts=%d", t.ID, t.State, t.Runtime, t.Attempts)
			if len(t.DependsOn) > 0 {
				fmt.Fprintf(&b, " deps=[%s]", strings.Join(t.DependsOn, " "))
			}
			if t.Attempt != "" {
				fmt.Fprintf(&b, " attempt=%s", t.Attempt)
			}
			if t.ResultBranch != "" || t.ResultCommit != "" {
				fmt.Fprintf(&b, " result=%s@%s", t.ResultBranch, t.ResultCommit)
			}
			if t.BlockedBy != "" {
				fmt.Fprintf(&b, " blocked_by=%s", t.BlockedBy)
			}
			if t.Error != nil {
				fmt.Fprintf(&b, " error=%s", renderError(t.Error))
			}
			if t.Round > 0 || t.RetryBase > 0 {
				fmt.Fprintf(&b, " round=%d retry_base=%d", t.Round, t.RetryBase)
			}
			if t.CancelRequested {
				b.WriteString(" cancel_requested")
			}
			fmt.Fprintf(&b, " updated=%s\n", ts(t.UpdatedAt))
			if r := t.Retry; r != nil {
				fmt.Fprintf(&b, "    retry #%d: %s runtime=%s", r.N, r.Strategy, r.Runtime)
				if r.Model != "" {
					fmt.Fprintf(&b, " model=%s", r.Model)
				}
				fmt.Fprintf(&b, " due=%s reason=%q\n", ts(r.DueAt), r.Reason)
			}
			if p := t.Plan; p != nil {
				fmt.Fprintf(&b, "    plan: worker=%s", renderChoice(p.Worker))
				if p.Validator != nil {
					fmt.Fprintf(&b, " validator=%s", renderChoice(*p.Validator))
				}
				if p.Review {
					b.WriteString(" review")
				}
				if p.Timeout > 0 {
					fmt.Fprintf(&b, " timeout=%s(%s)", p.Timeout, p.TimeoutFrom)
				}
				fmt.Fprintf(&b, " max_attempts=%d(%s)", p.Retry.MaxAttempts, p.RetryFrom["max_attempts"])
				if len(p.Retry.Fallback) > 0 {
					fmt.Fprintf(&b, " fallback=[%s](%s)", strings.Join(p.Retry.Fallback, " "), p.RetryFrom["fallback"])
				}
				if p.Scope != nil {
					fmt.Fprintf(&b, " scope=allow[%s]deny[%s](%s)", strings.Join(p.Scope.Allow, " "), strings.Join(p.Scope.Deny, " "), p.ScopeFrom)
				}
				b.WriteString("\n")
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Attempts)) {
		a := st.Attempts[id]
		fmt.Fprintf(&b, "attempt %s: %s/%s #%d %s epoch=%d", a.ID, a.Flow, a.Task, a.N, a.State, a.Epoch)
		if a.Phase != "" {
			fmt.Fprintf(&b, " phase=%s", a.Phase)
		}
		if a.Worker != "" {
			fmt.Fprintf(&b, " worker=%s", a.Worker)
		}
		if a.Fenced > 0 {
			fmt.Fprintf(&b, " fenced=%d", a.Fenced)
		}
		fmt.Fprintf(&b, " scheduled=%s claimed=%s ended=%s\n", ts(a.ScheduledAt), ts(a.ClaimedAt), ts(a.EndedAt))
		fmt.Fprintf(&b, "  runtime=%s pool=%s branch=%s", a.Runtime, a.Pool, a.Branch)
		if a.Timeout > 0 {
			fmt.Fprintf(&b, " timeout=%s", a.Timeout)
		}
		for _, m := range a.Merge {
			fmt.Fprintf(&b, " merge=%s:%s@%s", m.Task, m.Branch, m.Commit)
		}
		if a.Model != "" {
			fmt.Fprintf(&b, " model=%s", a.Model)
		}
		if len(a.Args) > 0 {
			fmt.Fprintf(&b, " args=[%s]", strings.Join(a.Args, " "))
		}
		b.WriteString("\n")
		if a.Prompt != "" {
			fmt.Fprintf(&b, "  prompt=%q\n", a.Prompt)
		}
		if a.Worktree != "" || a.BaseCommit != "" || a.Pid != 0 || a.DiffStat != "" {
			fmt.Fprintf(&b, "  worktree=%s base=%s pid=%d diff=%q\n", a.Worktree, a.BaseCommit, a.Pid, a.DiffStat)
		}
		if r := a.Report; r != nil {
			fmt.Fprintf(&b, "  report: success=%t exit=%d", r.Success, r.ExitCode)
			if r.Branch != "" || r.Commit != "" {
				fmt.Fprintf(&b, " result=%s@%s", r.Branch, r.Commit)
			}
			if r.Error != nil {
				fmt.Fprintf(&b, " error=%s", renderError(r.Error))
			}
			b.WriteString("\n")
		}
		if a.Error != nil {
			fmt.Fprintf(&b, "  classified: %s\n", renderError(a.Error))
		}
		if v := a.Verification; v != nil {
			fmt.Fprintf(&b, "  verification: passed=%t", v.Passed)
			for _, c := range v.Commands {
				fmt.Fprintf(&b, " cmd=%q:%d", c.Command, c.ExitCode)
				if c.TimedOut {
					b.WriteString("(timed out)")
				}
			}
			if r := v.Review; r != nil {
				fmt.Fprintf(&b, " review=%s:%t", r.Runtime, r.Passed)
				if len(r.Reasons) > 0 {
					fmt.Fprintf(&b, "%q", r.Reasons)
				}
				if r.Error != "" {
					fmt.Fprintf(&b, "(error %q)", r.Error)
				}
			}
			if len(v.ScopeViolations) > 0 {
				fmt.Fprintf(&b, " scope_violations=[%s]", strings.Join(v.ScopeViolations, " "))
			}
			b.WriteString("\n")
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(st.Poisons)) {
		p := st.Poisons[seq]
		fmt.Fprintf(&b, "poison %d (%d bytes): %s\n", p.Seq, p.Size, p.Reason)
	}
	fmt.Fprintf(&b, "seen: %d ids\n", len(st.Seen))
	return b.String()
}

func renderChoice(c policy.Choice) string {
	s := c.Name
	if c.Model != "" {
		s += "/" + c.Model
	}
	if len(c.Args) > 0 {
		s += "[" + strings.Join(c.Args, " ") + "]"
	}
	return s + "(" + string(c.From) + ")"
}

func renderError(e *ErrorInfo) string {
	s := e.Class
	if e.Category != "" {
		s += "/" + e.Category
	}
	s += fmt.Sprintf(" %q", e.Message)
	if e.Recoverable {
		s += " (recoverable)"
	}
	return s
}

// testdataStreams returns the messages every fold test file delivers, in
// order, one slice per file. The fuzz targets use them as seeds.
func testdataStreams(tb testing.TB) [][][]byte {
	tb.Helper()
	files, err := filepath.Glob("testdata/fold/*.txt")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no fold testdata: %v", err)
	}
	var out [][][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var msgs [][]byte
		var last uint64
		datadriven.RunTestFromStringAny(quietTB{tb}, string(data), func(tb testing.TB, d *datadriven.TestData) string {
			switch d.Cmd {
			case "submit", "event", "raw":
				m := buildMessage(tb, d, last+1)
				if m.seq == 0 {
					m.seq = last + 1
				}
				last = max(last, m.seq)
				msgs = append(msgs, m.raw)
			}
			return d.Expected
		})
		out = append(out, msgs)
	}
	return out
}

// quietTB keeps datadriven from echoing every directive under -v when the
// files are only read for their messages.
type quietTB struct{ testing.TB }

func (quietTB) Log(...any)          {}
func (quietTB) Logf(string, ...any) {}
