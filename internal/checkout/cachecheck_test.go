package checkout

import (
	"context"
	"os"
	"path/filepath"
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
			q, _ := filepath.Glob(filepath.Join(c.cache.Dir(), "quarantine", filepath.Base(cache)+"-*"))
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
