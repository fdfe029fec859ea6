package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTamperedCacheIsQuarantined: a cache whose config, hooks or info an
// agent changed (one running without the sandbox) is moved aside at its
// next use, never run, and cloned anew; so is one found changed at the end
// of an attempt.
func TestTamperedCacheIsQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	for name, tamper := range map[string]func(t *testing.T, cache, marker string){
		"fsmonitor in config": func(t *testing.T, cache, marker string) {
			gitT(t, "", "--git-dir="+cache, "config", "core.fsmonitor", "touch "+marker)
		},
		"upload-pack program": func(t *testing.T, cache, marker string) {
			gitT(t, "", "--git-dir="+cache, "config", "remote.origin.uploadpack", "touch "+marker+"; git-upload-pack")
		},
		"worktree config extension": func(t *testing.T, cache, marker string) {
			gitT(t, "", "--git-dir="+cache, "config", "extensions.worktreeConfig", "true")
		},
		"a hook": func(t *testing.T, cache, marker string) {
			writeFile(t, filepath.Join(cache, "hooks", "post-checkout"), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
		},
		"info/attributes": func(t *testing.T, cache, marker string) {
			writeFile(t, filepath.Join(cache, "info", "attributes"), "* filter=x\n", 0o644)
		},
		"alternates": func(t *testing.T, cache, marker string) {
			writeFile(t, filepath.Join(cache, "objects", "info", "alternates"), "/elsewhere/objects\n", 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newTestCache(t)
			marker := filepath.Join(t.TempDir(), "ran")
			w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/tamper/a/1"})
			cache := w.CommonDir()
			tamper(t, cache, marker)
			// The end of the attempt finds it.
			if err := c.Remove(ctx, w); err != nil {
				t.Fatal(err)
			}
			assertNotExist(t, cache)
			q, _ := filepath.Glob(filepath.Join(c.Dir(), quarantineDir, filepath.Base(cache)+"-*"))
			if len(q) != 1 {
				t.Fatalf("quarantined: %v", q)
			}
			// The next attempt gets a fresh clone; nothing planted ran.
			w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/tamper/b/1"})
			if w2.CommonDir() != cache || w2.Baseline != o.C2 {
				t.Errorf("second Prepare: cache %s baseline %s", w2.CommonDir(), w2.Baseline)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the planted command ran")
			}
		})
	}
}

// TestTamperedBetweenUsesIsCaughtBeforeGitRuns: changed while no attempt
// held it, the cache is quarantined by the next Prepare before any git
// command reads its config.
func TestTamperedBetweenUsesIsCaughtBeforeGitRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/between/a/1"})
	cache := w.CommonDir()
	if err := c.Remove(ctx, w); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	// fetch runs upload-pack on a local remote: the planted program would run.
	gitT(t, "", "--git-dir="+cache, "config", "remote.origin.uploadpack", "touch "+marker+"; git-upload-pack")
	o.pushNew(t, mainBranch, "new.txt", "new\n") // so that the next Prepare fetches
	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/between/b/1"})
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted upload-pack ran")
	}
	if got, err := gitE("", "--git-dir="+w2.CommonDir(), "config", "--get-all", "remote.origin.uploadpack"); err == nil {
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
	if err := c.Verify(ctx, o.URL); err != nil {
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
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/old/a/1"})
	cache := w.CommonDir()
	if err := c.Remove(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cache, digestFile)); err != nil {
		t.Fatal(err)
	}
	c2 := newTestCacheIn(t, dir) // a new process
	if err := c2.Verify(ctx, o.URL); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, digestFile)); err != nil {
		t.Fatalf("no digest taken: %v", err)
	}
	gitT(t, "", "--git-dir="+cache, "config", "core.hooksPath", "/tmp")
	err := c2.Verify(ctx, o.URL)
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
