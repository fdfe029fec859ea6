package projection_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// normalized drops what legitimately depends on the stream's sequence
// numbers rather than on its events: the applied sequence, and the sequence
// at which each id was first seen.
func normalized(recs map[string]string) map[string]string {
	out := make(map[string]string, len(recs))
	for k, v := range recs {
		switch {
		case k == store.AppliedKey:
			continue
		case strings.HasPrefix(k, projection.KeySeen):
			v = "<seq>"
		}
		out[k] = v
	}
	return out
}

// TestFoldOrderIndependent checks that any order the writers could produce,
// with republished events (same id, same or newer bytes), redelivered
// sequences and arbitrary commit points, folds to the same records as the
// clean stream: ids dedupe, sequences skip, and independent work commutes.
func TestFoldOrderIndependent(t *testing.T) {
	sc := foldtest.StandardScenario(t, false)
	sc.AddPolicyFlows(t, "")
	want := foldtest.FoldStream(t, sc.CleanStream(), ^uint64(0))
	wantRecs := normalized(foldtest.StoreRecords(t, want))
	if err := want.Close(); err != nil {
		t.Fatal(err)
	}
	// Sanity: the clean stream finished every flow as intended.
	for k, wants := range map[string][]string{
		"f/ok":         {`"state":"succeeded"`},
		"f/fail":       {`"state":"failed"`},
		"f/takeover":   {`"state":"succeeded"`},
		"t/fail/d":     {`"blocked_by":"a"`},
		"f/fallback":   {`"state":"succeeded"`, `"integration":{"n":1,"state":"succeeded"`},
		"t/fallback/a": {`"state":"succeeded"`, `"attempts":2`, `"result_commit":"ca"`},
		"a/" + drovertype.AttemptID("fallback", "a", 2): {`"runtime":"codex"`, `"prompt":"a\n\nattempt 1 was rate limited"`, `"verification":{"passed":true`},
		"f/cancel":   {`"state":"cancelled"`, `"cancel":{"reason":"stop"`},
		"t/cancel/a": {`"state":"cancelled"`},
		"t/cancel/c": {`"state":"blocked"`, `"blocked_by":"a"`},
		"a/" + drovertype.AttemptID("cancel", "a", 1): {`"state":"failed"`, `"class":"` + string(drovertype.ClassCancelled) + `","message":"cancelled"`},
		"a/" + drovertype.AttemptID("cancel", "b", 1): {`"state":"failed"`, `"phase":"attempt_abandoned"`},
		"f/reopen":   {`"state":"succeeded"`, `"round":2`, `"integration":{"n":3,"state":"succeeded"`},
		"t/reopen/a": {`"state":"succeeded"`, `"retry_base":1`, `"round":1`},
		"t/reopen/w": {`"state":"succeeded"`, `"attempts":1`},
	} {
		for _, want := range wants {
			if !strings.Contains(wantRecs[k], want) {
				t.Fatalf("clean stream: %s = %s, want %s", k, wantRecs[k], want)
			}
		}
	}

	// The scenario is one the controller could have written: it completes a
	// flow only when every task has ended, and the fold must agree.
	st := projection.NewState()
	for _, n := range sc.Nodes {
		if err := st.Apply(0, n.Ev); err != nil {
			t.Fatal(err)
		}
		if f := st.Flows[n.Ev.Flow]; n.Ev.Type == event.FlowCompleted && f != nil {
			for _, task := range st.FlowTasks(f) {
				if !task.State.Terminal() {
					t.Fatalf("clean stream: %s completes flow %s with task %s %s", n.Ev.ID, f.ID, task.ID, task.State)
				}
			}
		}
	}

	// Each run interleaves about 180 events of six flows; 20 runs take
	// about as long as 40 did over the first three flows alone.
	runs := 20
	if testing.Short() {
		runs = 8
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range runs {
		stream, deliveries := sc.NoisyStream(rng)
		fs := vfs.NewMem()
		s := foldtest.OpenMemStore(t, fs)
		for k, d := range deliveries {
			s.Stage(d.Seq, foldtest.Subject(d.Raw), d.Raw)
			if d.Commit {
				if err := s.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			// Now and then the controller restarts between commits.
			if d.Commit && k%7 == 3 {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = foldtest.OpenMemStore(t, fs)
			}
		}
		foldtest.CheckPersisted(t, s)
		got := normalized(foldtest.StoreRecords(t, s))
		if d := foldtest.DiffRecords(wantRecs, got); len(d) > 0 {
			var b strings.Builder
			for _, line := range d {
				k := line[2:]
				b.WriteString(line + "\n  clean: " + wantRecs[k] + "\n  noisy: " + got[k] + "\n")
			}
			t.Fatalf("run %d: a noisy order of %d deliveries folds differently:\n%s", run, len(deliveries), b.String())
		}
		// The noisy stream itself rebuilds to exactly the live store.
		rebuilt := foldtest.FoldStream(t, stream, s.Applied())
		foldtest.CompareStores(t, "noisy live vs rebuilt", s, rebuilt)
		if err := rebuilt.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
