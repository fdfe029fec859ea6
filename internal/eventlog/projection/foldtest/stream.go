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
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
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
		var leader uint64
		if d.HasArg("leader") {
			d.ScanArgs(tb, "leader", &leader)
		}
		id := str("id")
		switch {
		case id != "":
		case typ == event.LeaderElected:
			id = drovertype.EventID(typ, strconv.FormatUint(leader, 10))
		default:
			id = DefaultID(typ, flowID, attempt, epoch, key)
		}
		ev, err := event.New(id, typ, at, flowID, task, attempt, epoch, nil)
		if err != nil {
			tb.Fatalf("%s: %v", d.Pos, err)
		}
		ev.LeaderEpoch = leader
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
// in-memory state encodes to, with the applied sequence beside them, and
// the state's index agrees with it (CheckIndex). It only holds when
// nothing is staged but uncommitted.
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
	s.Read(func(st *projection.State) {
		mem = MemRecords(tb, st)
		CheckIndex(tb, st)
	})
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
