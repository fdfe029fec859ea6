package projection_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/eventlog/store"
)

// TestFold runs the datadriven fold tests in testdata/fold. Each file is one
// stream folded into a Store on an in-memory filesystem.
//
// Commands:
//
//	submit flow=ID [id=] [seq=] [time=] [nocommit]
//	  <flow spec as YAML or JSON>
//	event type=T flow=ID [task=] [attempt=] [epoch=] [leader=] [key=] [id=] [v=] [seq=] [time=] [subject=] [nocommit]
//	  <JSON payload; empty for none>
//	raw [seq=] [quoted | size=N] [subject=] [nocommit]
//	  <the message bytes; with quoted, a Go string literal>
//	redeliver seq=N     deliver the message at N again
//	commit              commit what nocommit staged
//	reopen              close and reopen the store (a restart)
//	state               the projection, for people
//	dump [prefix=P]     the store's records
//
// A message gets the sequence after the highest one delivered unless seq=
// says otherwise, and happens at 2025-01-01T00:00:00Z plus that many seconds
// unless time= says otherwise, on the subject its envelope names
// (drover.events.<flow>.<type>) unless subject= says otherwise. Event ids
// default to the ones the controller and workers write (see foldtest.DefaultID); a
// submitted flow's base defaults to HEAD, as Parse sets it. A delivered message prints the records
// its commit added (+), changed (~) or removed (-), and its poison if any.
//
// After every commit the store must hold exactly what the in-memory state
// encodes to; at the end of each file the store must equal a one-batch
// rebuild of its stream and survive a reopen unchanged.
func TestFold(t *testing.T) {
	datadriven.Walk(t, "testdata/fold", func(t *testing.T, path string) {
		h := newFoldHarness(t)
		datadriven.RunTest(t, path, h.run)
		h.finish(t)
	})
}

// foldHarness runs the datadriven fold tests against a Store on an
// in-memory filesystem.
type foldHarness struct {
	t      *testing.T
	fs     vfs.FS
	store  *store.Store
	last   uint64            // highest sequence delivered
	stream map[uint64][]byte // what the stream holds at each sequence
	// subjects are the subjects messages came on, where the test says.
	subjects map[uint64]string
}

func newFoldHarness(t *testing.T) *foldHarness {
	h := &foldHarness{t: t, fs: vfs.NewMem(), stream: map[uint64][]byte{}, subjects: map[uint64]string{}}
	h.store = foldtest.OpenMemStore(t, h.fs)
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
		m := foldtest.BuildMessage(t, d, h.last+1)
		if m.Seq == 0 {
			m.Seq = h.last + 1
		}
		return h.deliver(t, m)
	case "redeliver":
		var seq uint64
		d.ScanArgs(t, "seq", &seq)
		raw, ok := h.stream[seq]
		if !ok {
			t.Fatalf("%s: nothing at seq %d", d.Pos, seq)
		}
		subject, ok := h.subjects[seq]
		if !ok {
			subject = foldtest.Subject(raw)
		}
		return h.deliver(t, foldtest.Message{Seq: seq, Subject: subject, Raw: raw, Commit: true})
	case "commit":
		before := foldtest.StoreRecords(t, h.store)
		if err := h.store.Commit(); err != nil {
			return "error: " + err.Error()
		}
		foldtest.CheckPersisted(t, h.store)
		return h.changes(t, before, "commit")
	case "reopen":
		// A restart: whatever was staged but not committed is lost.
		if err := h.store.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		h.store = foldtest.OpenMemStore(t, h.fs)
		foldtest.CheckPersisted(t, h.store)
		return fmt.Sprintf("applied=%d", h.store.Applied())
	case "state":
		var out string
		h.store.Read(func(st *projection.State) { out = foldtest.RenderState(st) })
		return out
	case "dump":
		var prefix string
		d.MaybeScanArgs(t, "prefix", &prefix)
		var b strings.Builder
		recs := foldtest.StoreRecords(t, h.store)
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

func (h *foldHarness) deliver(t *testing.T, m foldtest.Message) string {
	before := foldtest.StoreRecords(t, h.store)
	if !h.store.Stage(m.Seq, m.Subject, m.Raw) {
		return fmt.Sprintf("seq %d: skipped (redelivery)", m.Seq)
	}
	if old, ok := h.stream[m.Seq]; ok && !bytes.Equal(old, m.Raw) {
		t.Fatalf("seq %d folded twice with different bytes: the test stream is inconsistent", m.Seq)
	}
	h.stream[m.Seq] = m.Raw
	if m.Subject != foldtest.Subject(m.Raw) {
		h.subjects[m.Seq] = m.Subject
	}
	h.last = max(h.last, m.Seq)
	if !m.Commit {
		return fmt.Sprintf("seq %d: staged", m.Seq)
	}
	if err := h.store.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	foldtest.CheckPersisted(t, h.store)
	out := h.changes(t, before, fmt.Sprintf("seq %d", m.Seq))
	h.store.Read(func(st *projection.State) {
		if p := st.Poisons[m.Seq]; p != nil {
			out += fmt.Sprintf("\npoison: %s", p.Reason)
		}
	})
	return out
}

func (h *foldHarness) changes(t *testing.T, before map[string]string, what string) string {
	after := foldtest.StoreRecords(t, h.store)
	delete(before, store.AppliedKey)
	delete(after, store.AppliedKey)
	d := foldtest.DiffRecords(before, after)
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
	rebuilt := foldtest.FoldStreamOn(t, h.stream, h.subjects, h.store.Applied())
	defer rebuilt.Close()
	foldtest.CompareStores(t, "live vs rebuilt", h.store, rebuilt)

	var before string
	h.store.Read(func(st *projection.State) { before = foldtest.RenderState(st) })
	if err := h.store.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	h.store = foldtest.OpenMemStore(t, h.fs)
	foldtest.CheckPersisted(t, h.store)
	var after string
	h.store.Read(func(st *projection.State) { after = foldtest.RenderState(st) })
	if before != after {
		t.Fatalf("state changed across a reopen:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
