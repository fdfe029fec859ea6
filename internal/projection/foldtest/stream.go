package foldtest

import (
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
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/event"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
	"github.com/drover-dev/drover/internal/projection"
	"github.com/drover-dev/drover/internal/store"
	yaml "go.yaml.in/yaml/v3"
)

// BaseTime is the clock of the test streams: by default the event at stream
// sequence n happens at BaseTime + n seconds.
var BaseTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TimeAt(seq uint64) time.Time { return BaseTime.Add(time.Duration(seq) * time.Second) }

// EncodeEvent builds and encodes one event, failing the test on error.
func EncodeEvent(tb testing.TB, id string, typ event.Type, at time.Time, flowID, task, attempt string, epoch uint64, data any) []byte {
	tb.Helper()
	ev, err := event.New(id, typ, at, flowID, task, attempt, epoch, data)
	if err != nil {
		tb.Fatalf("new event: %v", err)
	}
	raw, err := ev.Encode()
	if err != nil {
		tb.Fatalf("encode event: %v", err)
	}
	return raw
}

// DefaultID is the id the controller or a worker gives an event: a
// decision's is about its attempt (or its flow), a worker's about its
// attempt's claim at epoch, and a keyed worker event (file_modified) adds
// its key.
func DefaultID(typ event.Type, flowID, attempt string, epoch uint64, key string) string {
	about := flowID
	if attempt != "" {
		about = attempt
	}
	var extra []string
	if key != "" {
		extra = append(extra, key)
	}
	if epoch > 0 {
		return drovertype.ClaimEventID(typ, about, epoch, extra...)
	}
	if key != "" {
		about += ":" + key
	}
	return drovertype.EventID(typ, about)
}

// Subject is the subject a message is published on, as queue.PublishEvent
// publishes an event: drover.events.<flow>.<type> of its envelope, when it
// has one with a flow and a type; JunkSubject otherwise.
func Subject(raw []byte) string {
	var env struct {
		Flow string     `json:"flow"`
		Type event.Type `json:"type"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Flow == "" || env.Type == "" {
		return JunkSubject
	}
	return event.Subject(env.Flow, env.Type)
}

// JunkSubject is where the test streams publish what has no envelope.
const JunkSubject = event.SubjectPrefix + "junk.junk"

// Message is one message of a test stream, built from a datadriven directive.
type Message struct {
	Seq     uint64 // 0: the next sequence
	Subject string // where it was published
	Raw     []byte
	Commit  bool
}

// BuildMessage turns a submit, event or raw directive into the bytes of one
// stream Message. next is the sequence the Message gets unless seq= says
// otherwise; it also sets the default event time.
func BuildMessage(tb testing.TB, d *datadriven.TestData, next uint64) Message {
	tb.Helper()
	m := Message{Commit: !d.HasArg("nocommit")}
	if d.HasArg("seq") {
		d.ScanArgs(tb, "seq", &m.Seq)
	}
	seq := next
	if m.Seq != 0 {
		seq = m.Seq
	}
	at := TimeAt(seq)
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
		if spec.Base == "" {
			spec.Base = flow.DefaultBase // as Parse and the submit API leave it
		}
		id := str("id")
		if id == "" {
			id = DefaultID(event.FlowSubmitted, flowID, "", 0, "")
		}
		m.Raw = EncodeEvent(tb, id, event.FlowSubmitted, at, flowID, "", "", 0, event.FlowSubmittedData{Spec: spec})

	case "event":
		typ := event.Type(str("type"))
		flowID, task, attempt, key := str("flow"), str("task"), str("attempt"), str("key")
		var epoch uint64
		if d.HasArg("epoch") {
			d.ScanArgs(tb, "epoch", &epoch)
		}
		id := str("id")
		if id == "" {
			id = DefaultID(typ, flowID, attempt, epoch, key)
		}
		ev, err := event.New(id, typ, at, flowID, task, attempt, epoch, nil)
		if err != nil {
			tb.Fatalf("%s: %v", d.Pos, err)
		}
		if d.HasArg("v") {
			d.ScanArgs(tb, "v", &ev.V)
		}
		if in := strings.TrimSpace(d.Input); in != "" {
			ev.Data = json.RawMessage(in)
		}
		if m.Raw, err = ev.Encode(); err != nil {
			tb.Fatalf("%s: encode: %v", d.Pos, err)
		}

	case "raw":
		switch {
		case d.HasArg("size"):
			// An otherwise valid flow submission padded to exactly size bytes.
			var size int
			d.ScanArgs(tb, "size", &size)
			head := `{"v":1,"id":"flow_submitted:big","type":"flow_submitted","flow":"big","data":{"spec":{"name":"big","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p"}]},"pad":"`
			tail := `"}}`
			if size < len(head)+len(tail) {
				tb.Fatalf("%s: size %d too small", d.Pos, size)
			}
			m.Raw = []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
		case d.HasArg("quoted"):
			s, err := strconv.Unquote(strings.TrimSpace(d.Input))
			if err != nil {
				tb.Fatalf("%s: quoted input: %v", d.Pos, err)
			}
			m.Raw = []byte(s)
		default:
			m.Raw = []byte(d.Input)
		}
	default:
		tb.Fatalf("%s: not a Message: %s", d.Pos, d.Cmd)
	}
	m.Subject = Subject(m.Raw)
	if d.HasArg("subject") {
		d.ScanArgs(tb, "subject", &m.Subject)
	}
	return m
}

// Records reads every record of r, a store or a snapshot of one.
func Records(tb testing.TB, r store.Reader) map[string]string {
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

// MemRecords encodes every record of an in-memory state the way Commit
// would. It does not include the store's applied sequence.
func MemRecords(tb testing.TB, st *projection.State) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := st.Records(func(k string, v []byte) error {
		out[k] = string(v)
		return nil
	})
	if err != nil {
		tb.Fatalf("records: %v", err)
	}
	return out
}

// DiffRecords lists the keys that differ between two record sets, marked
// + (added), ~ (changed) or - (removed).
func DiffRecords(before, after map[string]string) []string {
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

// CheckPersisted fails unless the store's records are exactly what its
// in-memory state encodes to, with the applied sequence beside them. It only
// holds when nothing is staged but uncommitted.
func CheckPersisted(tb testing.TB, s *store.Store) {
	tb.Helper()
	snap, durable := s.Snapshot()
	defer snap.Close()
	if s.Applied() != durable {
		return
	}
	disk := Records(tb, snap)
	applied, ok := disk[store.AppliedKey]
	delete(disk, store.AppliedKey)
	switch {
	case durable == 0 && !ok:
	case applied != strconv.FormatUint(durable, 10):
		tb.Fatalf("%s is %q, want %d", store.AppliedKey, applied, durable)
	}
	var mem map[string]string
	s.Read(func(st *projection.State) { mem = MemRecords(tb, st) })
	if d := DiffRecords(disk, mem); len(d) > 0 {
		var b strings.Builder
		for _, line := range d {
			k := line[2:]
			fmt.Fprintf(&b, "%s\n  store:  %s\n  memory: %s\n", line, disk[k], mem[k])
		}
		tb.Fatalf("store and memory disagree (a mutation not marked dirty?):\n%s", b.String())
	}
}

// StoreRecords reads every committed record of s.
func StoreRecords(tb testing.TB, s *store.Store) map[string]string {
	tb.Helper()
	snap, _ := s.Snapshot()
	defer snap.Close()
	return Records(tb, snap)
}

// OpenMemStore opens a store on fs, failing the test on error.
func OpenMemStore(tb testing.TB, fs vfs.FS) *store.Store {
	tb.Helper()
	s, err := store.Open("db", store.Options{FS: fs})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	return s
}

// FoldStream folds a stream (sequence -> message, each on its Subject) into
// a fresh in-memory store in one batch, the way `controller rebuild` does.
func FoldStream(tb testing.TB, stream map[uint64][]byte, upTo uint64) *store.Store {
	return FoldStreamOn(tb, stream, nil, upTo)
}

// FoldStreamOn is FoldStream with the subjects of some messages given.
func FoldStreamOn(tb testing.TB, stream map[uint64][]byte, subjects map[uint64]string, upTo uint64) *store.Store {
	tb.Helper()
	s := OpenMemStore(tb, vfs.NewMem())
	for _, seq := range slices.Sorted(maps.Keys(stream)) {
		if seq > upTo {
			break
		}
		subject, ok := subjects[seq]
		if !ok {
			subject = Subject(stream[seq])
		}
		s.Stage(seq, subject, stream[seq])
	}
	if err := s.Commit(); err != nil {
		tb.Fatalf("commit: %v", err)
	}
	return s
}

// CompareStores fails if a and b differ in any committed record.
func CompareStores(tb testing.TB, what string, a, b *store.Store) {
	tb.Helper()
	sa, _ := a.Snapshot()
	defer sa.Close()
	sb, _ := b.Snapshot()
	defer sb.Close()
	diffs, err := store.Compare(sa, sb, 20)
	if err != nil {
		tb.Fatalf("%s: compare: %v", what, err)
	}
	if len(diffs) > 0 {
		tb.Fatalf("%s: stores differ:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// RenderState prints a state for people: flows with their tasks in
// dependency order, then attempts, poison and the number of ids seen.
// Times are shown as seconds after BaseTime.
func RenderState(st *projection.State) string {
	var b strings.Builder
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := t.Sub(BaseTime)
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

func renderError(e *event.ErrorInfo) string {
	s := string(e.Class)
	if e.Category != "" {
		s += "/" + string(e.Category)
	}
	s += fmt.Sprintf(" %q", e.Message)
	if e.Recoverable {
		s += " (recoverable)"
	}
	return s
}

// TestdataStreams returns the messages every fold test file delivers, in
// order, one slice per file. The fuzz targets use them as seeds.
func TestdataStreams(tb testing.TB, dir string) [][][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
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
				m := BuildMessage(tb, d, last+1)
				if m.Seq == 0 {
					m.Seq = last + 1
				}
				last = max(last, m.Seq)
				msgs = append(msgs, m.Raw)
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
