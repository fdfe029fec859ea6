package repocache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTamperedBetweenUsesIsCaughtBeforeGitRuns: changed while no attempt
// held it, the cache is quarantined by the next Prepare before any git
// command reads its config.
func TestTamperedBetweenUsesIsCaughtBeforeGitRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	cache := resolve(t, c, Request{URL: o.URL, Base: mainBranch, Branch: "drover/between/a/1"}).Repo.Dir()
	marker := filepath.Join(t.TempDir(), "ran")
	// fetch runs upload-pack on a local remote: the planted program would run.
	gitT(t, "", "--git-dir="+cache, "config", "remote.origin.uploadpack", "touch "+marker+"; git-upload-pack")
	o.PushNew(t, mainBranch, "new.txt", "new\n") // so that the next Prepare fetches
	w2 := resolve(t, c, Request{URL: o.URL, Base: mainBranch, Branch: "drover/between/b/1"})
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted upload-pack ran")
	}
	if got, err := gitE("", "--git-dir="+w2.Repo.Dir(), "config", "--get-all", "remote.origin.uploadpack"); err == nil {
		t.Errorf("the new clone has the planted config: %q", got)
	}
	// The vector is real: git fetching with that config runs the program.
	q, _ := filepath.Glob(filepath.Join(c.Dir(), quarantineDir, "*"))
	if len(q) != 1 {
		t.Fatalf("quarantined: %v", q)
	}
	gitT(t, "", "--git-dir="+q[0], "fetch", "-q", "origin")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("a fetch with the planted config did not run it (the test proves nothing): %v", err)
	}
	if err := c.verifyURL(ctx, o.URL); err != nil {
		t.Errorf("Verify of the fresh clone: %v", err)
	}
}

// TestCacheWithoutDigestIsTrustedOnce: a cache cloned before digests
// existed gets one at its first use, and is checked from then on.
func TestCacheWithoutDigestIsTrustedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	dir := t.TempDir()
	c := newTestCacheIn(t, dir)
	cache := resolve(t, c, Request{URL: o.URL, Base: mainBranch, Branch: "drover/old/a/1"}).Repo.Dir()
	if err := os.Remove(filepath.Join(cache, digestFile)); err != nil {
		t.Fatal(err)
	}
	c2 := newTestCacheIn(t, dir) // a new process
	if err := c2.verifyURL(ctx, o.URL); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, digestFile)); err != nil {
		t.Fatalf("no digest taken: %v", err)
	}
	gitT(t, "", "--git-dir="+cache, "config", "core.hooksPath", "/tmp")
	err := c2.verifyURL(ctx, o.URL)
	if !errors.Is(err, ErrCacheTampered) || !strings.Contains(err.Error(), "config modified") {
		t.Errorf("Verify after a change: %v", err)
	}
}

func TestDigestChanges(t *testing.T) {
	got := digestChanges([]string{"a1 config", "b1 hooks", "c1 info/exclude"}, []string{"a2 config", "b1 hooks", "d1 hooks/pre-commit"})
	want := []string{"config modified", "hooks/pre-commit created", "info/exclude deleted"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%q, want %q", got, want)
	}
}

// BenchmarkDigest times the cache's digest, taken and checked around every
// attempt (checkout's BenchmarkAgentRepo times the rest of the file work an
// attempt adds).
func BenchmarkDigest(b *testing.B) {
	res := resolve(b, newTestCache(b), Request{URL: newOrigin(b).URL, Base: mainBranch, Branch: "drover/bench"})
	for b.Loop() {
		if _, err := digestOf(res.Repo.Dir()); err != nil {
			b.Fatal(err)
		}
	}
}
