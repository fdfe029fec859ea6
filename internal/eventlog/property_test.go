package eventlog

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// normalized drops what legitimately depends on the stream's sequence
// numbers rather than on its events: the applied sequence, and the sequence
// at which each id was first seen.
func normalized(recs map[string]string) map[string]string {
	out := make(map[string]string, len(recs))
	for k, v := range recs {
		switch {
		case k == keyApplied:
			continue
		case strings.HasPrefix(k, keySeen):
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
	sc := standardScenario(t, false)
	want := foldStream(t, sc.cleanStream(), ^uint64(0))
	wantRecs := normalized(records(t, want.db))
	if err := want.Close(); err != nil {
		t.Fatal(err)
	}
	// Sanity: the clean stream finished every flow as intended.
	for k, state := range map[string]string{"f/ok": `"state":"succeeded"`, "f/fail": `"state":"failed"`, "f/takeover": `"state":"succeeded"`, "t/fail/d": `"blocked_by":"a"`} {
		if !strings.Contains(wantRecs[k], state) {
			t.Fatalf("clean stream: %s = %s, want %s", k, wantRecs[k], state)
		}
	}

	runs := 40
	if testing.Short() {
		runs = 15
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range runs {
		stream, deliveries := sc.noisyStream(rng)
		fs := vfs.NewMem()
		s := openMemStore(t, fs)
		for k, d := range deliveries {
			s.Stage(d.seq, d.raw)
			if d.commit {
				if err := s.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			// Now and then the controller restarts between commits.
			if d.commit && k%7 == 3 {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openMemStore(t, fs)
			}
		}
		checkPersisted(t, s)
		got := normalized(records(t, s.db))
		if d := diffRecords(wantRecs, got); len(d) > 0 {
			var b strings.Builder
			for _, line := range d {
				k := line[2:]
				b.WriteString(line + "\n  clean: " + wantRecs[k] + "\n  noisy: " + got[k] + "\n")
			}
			t.Fatalf("run %d: a noisy order of %d deliveries folds differently:\n%s", run, len(deliveries), b.String())
		}
		// The noisy stream itself rebuilds to exactly the live store.
		rebuilt := foldStream(t, stream, s.Applied())
		compareStores(t, "noisy live vs rebuilt", s, rebuilt)
		if err := rebuilt.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
