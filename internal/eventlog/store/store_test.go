package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

func TestStoreReopen(t *testing.T) {
	sc := foldtest.StandardScenario(t, true)
	stream := sc.CleanStream()
	fs := vfs.NewMem()
	s := foldtest.OpenMemStore(t, fs)
	if got := s.Applied(); got != 0 {
		t.Fatalf("fresh store: Applied() = %d", got)
	}
	n := uint64(len(stream))
	for seq := uint64(1); seq <= n; seq++ {
		if !s.Stage(seq, foldtest.Subject(stream[seq]), stream[seq]) {
			t.Fatalf("Stage(%d) skipped", seq)
		}
		if seq%5 == 0 {
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	foldtest.CheckPersisted(t, s)
	dump, err := dumpOf(s)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	s.Read(func(st *projection.State) { state = foldtest.RenderState(st) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = foldtest.OpenMemStore(t, fs)
	defer s.Close()
	if got := s.Applied(); got != n {
		t.Fatalf("reopened: Applied() = %d, want %d", got, n)
	}
	dump2, err := dumpOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if dump != dump2 {
		t.Fatalf("dump changed across reopen:\n%s\n---\n%s", dump, dump2)
	}
	var state2 string
	s.Read(func(st *projection.State) { state2 = foldtest.RenderState(st) })
	if state != state2 {
		t.Fatalf("state changed across reopen:\n%s\n---\n%s", state, state2)
	}
	foldtest.CheckPersisted(t, s)
	for _, want := range []string{"m/applied = " + fmt.Sprint(n) + "\n", "f/ok = ", "p/0000", "e/flow_submitted:fail = "} {
		if !strings.Contains(dump2, want) {
			t.Errorf("dump lacks %q", want)
		}
	}

	// Everything up to Applied is a redelivery now, and a commit with
	// nothing staged writes nothing.
	if s.Stage(n, foldtest.Subject(stream[n]), stream[n]) || s.Stage(1, foldtest.Subject(stream[1]), stream[1]) {
		t.Fatal("Stage folded a sequence at or below Applied after reopen")
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if dump3, _ := dumpOf(s); dump3 != dump {
		t.Fatal("an empty commit changed the store")
	}
}

// TestStoreSnapshot checks that a snapshot shows what was committed, with
// the sequence it reflects, and not what is only staged.
func TestStoreSnapshot(t *testing.T) {
	stream := foldtest.StandardScenario(t, false).CleanStream()
	s := foldtest.OpenMemStore(t, vfs.NewMem())
	defer s.Close()
	for seq := uint64(1); seq <= 3; seq++ {
		s.Stage(seq, foldtest.Subject(stream[seq]), stream[seq])
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Stage(4, foldtest.Subject(stream[4]), stream[4])
	snap, seq := s.Snapshot()
	defer snap.Close()
	if seq != 3 || s.Applied() != 4 {
		t.Fatalf("Snapshot seq %d, Applied %d; want 3 and 4", seq, s.Applied())
	}
	recs := foldtest.Records(t, snap)
	if recs[store.AppliedKey] != "3" {
		t.Fatalf("snapshot m/applied = %q", recs[store.AppliedKey])
	}
	ref := foldtest.FoldStream(t, stream, 3)
	defer ref.Close()
	diffs, err := compareWith(t, snap, ref)
	if err != nil || len(diffs) > 0 {
		t.Fatalf("snapshot is not the fold of 1..3: %v %v", diffs, err)
	}
}

func TestStoreClose(t *testing.T) {
	s := foldtest.OpenMemStore(t, vfs.NewMem())
	s.Stage(1, foldtest.Subject([]byte("junk")), []byte("junk"))
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Commit(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
	// Reads of the in-memory state still work.
	if s.Applied() != 1 {
		t.Fatalf("Applied after Close = %d", s.Applied())
	}
}

func TestOpenStoreErrors(t *testing.T) {
	fs := vfs.NewMem()
	s := foldtest.OpenMemStore(t, fs)
	// A second open of the same directory fails on Pebble's lock, and
	// leaves no goroutines behind (goleak checks at the end).
	if s2, err := store.Open("db", store.Options{FS: fs}); err == nil {
		s2.Close()
		t.Fatal("second OpenStore of a locked directory succeeded")
	}
	// A record the projection cannot load makes store.Open fail.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("t/f/x"), []byte("{not json"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s2, err := store.Open("db", store.Options{FS: fs}); err == nil || !strings.Contains(err.Error(), `"t/f/x"`) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("open with a broken record: %v", err)
	}
}

func TestCompare(t *testing.T) {
	open := func(recs map[string]string) *pebble.DB {
		db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for k, v := range recs {
			if err := db.Set([]byte(k), []byte(v), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		return db
	}
	live := open(map[string]string{"a/1": "x", "b/2": "same", "c/3": "old", "e/4": "only-live", "z": "z"})
	rebuilt := open(map[string]string{"a/0": "only-rebuilt", "a/1": "x", "b/2": "same", "c/3": "new", "z": "z"})
	empty := open(nil)

	all := []string{
		"only in rebuilt: a/0",
		"differs: c/3\n  live:    old\n  rebuilt: new",
		"only in live: e/4",
	}
	for _, tc := range []struct {
		a, b  *pebble.DB
		limit int
		want  []string
	}{
		{live, live, 10, nil},
		{empty, empty, 10, nil},
		{live, rebuilt, 10, all},
		{live, rebuilt, 3, all},
		{live, rebuilt, 2, all[:2]},
		{live, rebuilt, 1, all[:1]},
		{live, rebuilt, 0, all},  // no limit
		{live, rebuilt, -1, all}, // no limit
		{empty, rebuilt, 2, []string{"only in rebuilt: a/0", "only in rebuilt: a/1"}},
		{live, empty, 1, []string{"only in live: a/1"}},
	} {
		got, err := store.Compare(tc.a, tc.b, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("store.Compare(limit %d) = %q, want %q", tc.limit, got, tc.want)
		}
	}
	if got, _ := store.Compare(empty, live, 0); len(got) != 5 {
		t.Errorf("store.Compare(empty, live) found %d differences, want 5: %q", len(got), got)
	}

	dump, err := store.Dump(rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a/0 = only-rebuilt\na/1 = x\nb/2 = same\nc/3 = new\nz = z\n"; dump != want {
		t.Errorf("Dump = %q, want %q", dump, want)
	}
	if dump, _ := store.Dump(empty); dump != "" {
		t.Errorf("store.Dump(empty) = %q", dump)
	}
}

// TestStoreCrash checks that Commit is atomic with the applied sequence: a
// crash at any point (between or during Stage and Commit calls, with any
// part of the unsynced writes surviving) leaves a store that is exactly the
// fold of the stream up to its Applied(), at a commit boundary, and folding
// on from Applied()+1 reaches the same final state as a run that never
// crashed.
func TestStoreCrash(t *testing.T) {
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			testStoreCrash(t, seed)
		})
	}
}

type crashClone struct {
	fs      *vfs.MemFS
	durable uint64 // the highest sequence committed before the clone was taken
	what    string
}

func testStoreCrash(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	// Commits are not synced, and Pebble writes the WAL out in 32 KiB
	// blocks, so a crash only keeps commits beyond the first block or so:
	// the stream must write well over that for the crashes to land on many
	// different prefixes.
	sc := &foldtest.Scenario{}
	for i := range 4 {
		sc.AddStandard(t, fmt.Sprint(i), true, 1500)
	}
	stream, deliveries := sc.NoisyStream(rng)

	fs := vfs.NewCrashableMem()
	s := foldtest.OpenMemStore(t, fs)
	var (
		mu        sync.Mutex
		clones    []crashClone
		durable   atomic.Uint64
		bounds    = map[uint64]bool{0: true} // sequences a commit ended at
		unsynced  = []int{0, 0, 10, 50, 90, 100}
		crashHere = func(what string) {
			cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced[rng.IntN(len(unsynced))]}
			if cfg.UnsyncedDataPercent > 0 {
				cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			}
			c := crashClone{fs: fs.CrashClone(cfg), durable: durable.Load(), what: what}
			mu.Lock()
			clones = append(clones, c)
			mu.Unlock()
		}
	)

	// Crash at random points between calls, and also at arbitrary moments
	// from another goroutine, which lands inside Commit (and inside Pebble's
	// own background work) too.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := crashClone{durable: durable.Load(), what: "concurrent"}
			c.fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: r})
			mu.Lock()
			clones = append(clones, c)
			n := len(clones)
			mu.Unlock()
			if n > 100 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()

	for k, d := range deliveries {
		if rng.IntN(8) == 0 {
			crashHere(fmt.Sprintf("before delivery %d (seq %d)", k, d.Seq))
		}
		s.Stage(d.Seq, foldtest.Subject(d.Raw), d.Raw)
		if d.Commit {
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			a := s.Applied()
			bounds[a] = true
			durable.Store(a)
			if rng.IntN(4) == 0 {
				crashHere(fmt.Sprintf("after commit at seq %d", a))
			}
		}
	}
	close(stop)
	wg.Wait()
	crashHere("at the end")
	foldtest.CheckPersisted(t, s)
	final := s
	defer final.Close()

	// The uninterrupted run equals a one-batch rebuild of its stream.
	last := final.Applied()
	rebuilt := foldtest.FoldStream(t, stream, last)
	foldtest.CompareStores(t, "uninterrupted vs rebuilt", final, rebuilt)
	rebuilt.Close()

	// Verify a sample of the clones, keeping the test quick: the fold of
	// each prefix is built once, and the resumption is run once per prefix
	// (it is a function of the records, which the comparison shows equal).
	limit := 30
	if testing.Short() {
		limit = 15
	}
	rng.Shuffle(len(clones), func(i, j int) { clones[i], clones[j] = clones[j], clones[i] })
	clones = clones[:min(limit, len(clones))]
	prefixes := map[uint64]*store.Store{}
	defer func() {
		for _, p := range prefixes {
			p.Close()
		}
	}()
	var reopenedAt []uint64
	for _, c := range clones {
		r, err := store.Open("db", store.Options{FS: c.fs})
		if err != nil {
			t.Fatalf("crash %s: reopen: %v", c.what, err)
		}
		applied := r.Applied()
		if !bounds[applied] {
			t.Fatalf("crash %s: reopened at seq %d, which no commit ended at", c.what, applied)
		}
		// A commit finished before the clone was taken is not necessarily
		// durable (NoSync), but nothing committed later can be there.
		if applied > last || (c.what != "concurrent" && applied > c.durable) {
			t.Fatalf("crash %s: reopened at seq %d beyond the last commit before the crash (%d)", c.what, applied, c.durable)
		}
		foldtest.CheckPersisted(t, r)
		prefix, resumed := prefixes[applied]
		if !resumed {
			prefix = foldtest.FoldStream(t, stream, applied)
			prefixes[applied] = prefix
			reopenedAt = append(reopenedAt, applied)
		}
		foldtest.CompareStores(t, fmt.Sprintf("crash %s: reopened at %d vs fold of 1..%d", c.what, applied, applied), r, prefix)

		if !resumed {
			// Resume as the controller does: from Applied()+1.
			for seq := applied + 1; seq <= last; seq++ {
				if raw, ok := stream[seq]; ok {
					r.Stage(seq, foldtest.Subject(raw), raw)
				}
			}
			if err := r.Commit(); err != nil {
				t.Fatal(err)
			}
			foldtest.CompareStores(t, fmt.Sprintf("crash %s: resumed from %d vs uninterrupted", c.what, applied), r, final)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(reopenedAt)
	t.Logf("%d deliveries, %d commit boundaries, %d crash points checked; reopened at %v", len(deliveries), len(bounds), len(clones), slices.Compact(reopenedAt))
}

// TestTasksSharePlans: tasks with equal plans share one copy, in the live
// projection and once loaded again, and each still reads its own plan.
func TestTasksSharePlans(t *testing.T) {
	plan := func(runtime string) policy.Resolved {
		return policy.Resolved{Worker: policy.Choice{Name: runtime}, Retry: policy.DefaultRetry(),
			RetryFrom: map[string]policy.Level{"max_attempts": policy.LevelBuiltin}}
	}
	spec := flow.Spec{Name: "p", Repo: "/r.git", Base: "main", Tasks: []flow.Task{
		{ID: "a", Prompt: "a"}, {ID: "b", Prompt: "b"}, {ID: "c", Prompt: "c"}}}
	ev := foldtest.EncodeEvent(t, "flow_submitted:p", event.FlowSubmitted, time.Unix(1, 0).UTC(), "p", "", "", 0,
		event.FlowSubmittedData{Spec: spec, Plan: map[string]policy.Resolved{"a": plan("codex"), "b": plan("codex"), "c": plan("claude-code")}})
	check := func(s *store.Store, when string) {
		t.Helper()
		s.Read(func(st *projection.State) {
			a, b, c := st.Task("p", "a").Plan, st.Task("p", "b").Plan, st.Task("p", "c").Plan
			if a != b || a == c {
				t.Errorf("%s: tasks a and b share a plan: %v, a and c: %v; want true, false", when, a == b, a == c)
			}
			if a.Worker.Name != "codex" || c.Worker.Name != "claude-code" || b.RetryFrom["max_attempts"] != policy.LevelBuiltin {
				t.Errorf("%s: plans %+v, %+v", when, *a, *c)
			}
		})
	}
	fs := vfs.NewMem()
	s := foldtest.OpenMemStore(t, fs)
	s.Stage(1, foldtest.Subject(ev), ev)
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	check(s, "folded")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = foldtest.OpenMemStore(t, fs)
	defer s.Close()
	check(s, "loaded")
}

// dumpOf is store.Dump of what s committed.
func dumpOf(s *store.Store) (string, error) {
	snap, _ := s.Snapshot()
	defer snap.Close()
	return store.Dump(snap)
}

// compareWith compares a snapshot with what s committed.
func compareWith(t *testing.T, snap store.Reader, s *store.Store) ([]string, error) {
	t.Helper()
	other, _ := s.Snapshot()
	defer other.Close()
	return store.Compare(snap, other, 0)
}

// quietLogger keeps Pebble quiet in tests that open a DB of their own.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// TestPoisonBounded: a flood of junk leaves the count and the last
// MaxPoisons records, each of bounded size, in memory and on disk; the
// records it evicts are deleted in the batch that evicts them; a rebuild
// of the stream and a reopen agree.
func TestPoisonBounded(t *testing.T) {
	const junk = 3*projection.MaxPoisons + 17
	good := foldtest.StandardScenario(t, false).CleanStream()
	stream := map[uint64][]byte{}
	subjects := map[uint64]string{}
	var seq uint64
	for i := range junk {
		seq++
		switch i % 4 {
		case 0: // not an event at all
			stream[seq] = []byte(fmt.Sprintf("junk %d %s", i, strings.Repeat("x", i%300)))
		case 1: // an event on another flow's subject, with a long subject
			stream[seq] = []byte(fmt.Sprintf(`{"v":1,"id":"flow_paused:ok:%d","type":"flow_paused","flow":"ok","data":{}}`, i))
			subjects[seq] = "drover.events.other." + strings.Repeat("y", 4000)
		case 2: // a claim of an attempt nobody scheduled
			stream[seq] = []byte(fmt.Sprintf(`{"v":1,"id":"attempt_claimed:ok_a_%d:1","type":"attempt_claimed","flow":"ok","task":"a","attempt":"ok_a_%d","epoch":1,"data":{"worker":"w"}}`, i+1, i+1))
		case 3: // a completion of a flow never submitted
			stream[seq] = []byte(fmt.Sprintf(`{"v":1,"id":"flow_completed:f%d","type":"flow_completed","flow":"f%d","data":{"state":"failed"}}`, i, i))
		}
	}
	for i := uint64(1); i <= uint64(len(good)); i++ {
		seq++
		stream[seq] = good[i]
	}
	fs := vfs.NewMem()
	s := foldtest.OpenMemStore(t, fs)
	for i := uint64(1); i <= seq; i++ {
		subject, ok := subjects[i]
		if !ok {
			subject = foldtest.Subject(stream[i])
		}
		s.Stage(i, subject, stream[i])
		if i%97 == 0 {
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			foldtest.CheckPersisted(t, s)
		}
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	foldtest.CheckPersisted(t, s)
	s.Read(func(st *projection.State) {
		if st.PoisonCount != junk || len(st.Poisons) != projection.MaxPoisons {
			t.Fatalf("%d poison records of %d counted, want %d of %d", len(st.Poisons), st.PoisonCount, projection.MaxPoisons, junk)
		}
		for q := uint64(junk - projection.MaxPoisons + 1); q <= junk; q++ {
			if st.Poisons[q] == nil {
				t.Fatalf("the poison at %d, among the last %d, is gone", q, projection.MaxPoisons)
			}
		}
		if f := st.Flows["ok"]; f == nil || f.State != "succeeded" {
			t.Fatalf("the good flow after the junk: %+v", f)
		}
	})
	recs := foldtest.StoreRecords(t, s)
	var records, bytes int
	for k, v := range recs {
		if strings.HasPrefix(k, "p/") {
			records++
			bytes += len(k) + len(v)
		}
	}
	if records != projection.MaxPoisons || recs["n/poisons"] != fmt.Sprint(junk) {
		t.Fatalf("the store holds %d poison records and count %q", records, recs["n/poisons"])
	}
	if bytes > projection.MaxPoisons*700 {
		t.Errorf("%d poison records take %d bytes", records, bytes)
	}
	rebuilt := foldtest.FoldStreamOn(t, stream, subjects, seq)
	defer rebuilt.Close()
	foldtest.CompareStores(t, "live vs rebuilt", s, rebuilt)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = foldtest.OpenMemStore(t, fs)
	defer s.Close()
	foldtest.CheckPersisted(t, s)
	s.Read(func(st *projection.State) {
		if st.PoisonCount != junk || len(st.Poisons) != projection.MaxPoisons {
			t.Fatalf("reopened: %d poison records of %d counted", len(st.Poisons), st.PoisonCount)
		}
	})
	// One more poison after the reopen evicts the oldest left.
	oldest := uint64(junk - projection.MaxPoisons + 1)
	s.Stage(seq+1, foldtest.JunkSubject, []byte("more junk"))
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, ok := foldtest.StoreRecords(t, s)[fmt.Sprintf("p/%020d", oldest)]; ok {
		t.Errorf("poison %d was not deleted from the store when evicted", oldest)
	}
}

// TestOlderFlowRecordsAreSplit: a store written before a flow's definition
// had a record of its own (f/ holding the spec and the order) is written
// again when opened, split into f/ and fd/, so that it equals a rebuild of
// its stream.
func TestOlderFlowRecordsAreSplit(t *testing.T) {
	sc := foldtest.StandardScenario(t, false)
	stream := sc.CleanStream()
	fs := vfs.NewMem()
	s := foldtest.OpenMemStore(t, fs)
	n := uint64(len(stream))
	for seq := uint64(1); seq <= n; seq++ {
		s.Stage(seq, foldtest.Subject(stream[seq]), stream[seq])
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	var old map[string][]byte // each flow's record as an older build wrote it
	s.Read(func(st *projection.State) {
		old = map[string][]byte{}
		for id, f := range st.Flows {
			b, err := json.Marshal(f) // Order and Spec included
			if err != nil {
				t.Fatal(err)
			}
			old[id] = b
		}
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for id, b := range old {
		if err := db.Set([]byte("f/"+id), b, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Delete([]byte("fd/"+id), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = foldtest.OpenMemStore(t, fs)
	defer s.Close()
	rebuilt := foldtest.FoldStream(t, stream, n)
	defer rebuilt.Close()
	snap, _ := rebuilt.Snapshot()
	defer snap.Close()
	diffs, err := compareWith(t, snap, s)
	if err != nil || len(diffs) > 0 {
		t.Fatalf("the reopened store differs from its rebuild (%v):\n%s", err, strings.Join(diffs, "\n"))
	}
	s.Read(func(st *projection.State) {
		if f := st.Flows["ok"]; f == nil || len(f.Order) != 4 || len(f.Spec.Tasks) != 4 {
			t.Errorf("flow ok after the reopen: %+v", f)
		}
	})
}

// TestChangedCountsWhatCommitWrites: Changed is how many records, besides
// the ids seen, the next Commit writes (the fold commits by it), and Count
// how many the store holds.
func TestChangedCountsWhatCommitWrites(t *testing.T) {
	sc := foldtest.StandardScenario(t, true)
	stream := sc.CleanStream()
	s := foldtest.OpenMemStore(t, vfs.NewMem())
	defer s.Close()
	if got := s.Changed(); got != 0 {
		t.Fatalf("fresh store: Changed() = %d", got)
	}
	wrote := 0
	for seq := uint64(1); seq <= uint64(len(stream)); seq++ {
		s.Stage(seq, foldtest.Subject(stream[seq]), stream[seq])
		if seq%7 != 0 && seq != uint64(len(stream)) {
			continue
		}
		before, err := dumpOf(s)
		if err != nil {
			t.Fatal(err)
		}
		changed := s.Changed()
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		after, err := dumpOf(s)
		if err != nil {
			t.Fatal(err)
		}
		written := 0
		old := map[string]bool{}
		for _, l := range strings.Split(before, "\n") {
			old[l] = true
		}
		for _, l := range strings.Split(after, "\n") {
			if !old[l] && !strings.HasPrefix(l, "e/") && !strings.HasPrefix(l, store.AppliedKey+" ") {
				written++
			}
		}
		// A record written again with its old value shows no new line:
		// written <= changed.
		wrote += written
		if written > changed {
			t.Fatalf("seq %d: Changed() = %d before the commit, which wrote %d new records", seq, changed, written)
		}
		if got := s.Changed(); got != 0 {
			t.Fatalf("seq %d: Changed() = %d after a commit", seq, got)
		}
		snap, _ := s.Snapshot()
		n, err := store.Count(snap)
		snap.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Count(after, "\n"); n != want {
			t.Fatalf("seq %d: Count = %d, the dump has %d records", seq, n, want)
		}
	}
	if wrote == 0 {
		t.Fatal("no commit wrote a record: the scenario tests nothing")
	}
}
