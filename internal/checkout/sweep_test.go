package checkout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/repocache"
)

// TestSweepRemovesLeftovers: a worker killed mid-attempt leaves worktrees
// and their branches in its cache. A sweep — by a new Cache, as a restarted
// worker has — removes those it is not told to keep, and git forgets them:
// the same branches can be prepared again.
func TestSweepRemovesLeftovers(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	cacheDir, wtDir := t.TempDir(), t.TempDir()
	dead := newTestCacheIn(t, cacheDir)
	paths := map[string]string{}
	for _, name := range []string{"gone-1", "gone-2", "kept"} {
		paths[name] = filepath.Join(wtDir, name)
		w := prepare(t, dead, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/" + name + "/1", Path: paths[name]})
		writeFile(t, filepath.Join(w.Path, "work.txt"), "unfinished\n", 0o644)
	}

	c := newTestCacheIn(t, cacheDir) // the restarted worker's
	removed, err := c.Sweep(context.Background(), wtDir, func(p string) bool { return p == paths["kept"] })
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	assertStrings(t, "removed", removed, []string{paths["gone-1"], paths["gone-2"]})
	assertNotExist(t, paths["gone-1"])
	assertNotExist(t, paths["gone-2"])
	if got := readFile(t, filepath.Join(paths["kept"], "work.txt")); got != "unfinished\n" {
		t.Errorf("kept worktree changed: %q", got)
	}
	rd := repoDir(t, c, o.URL)
	branches := gitT(t, "", "--git-dir="+rd, "for-each-ref", "--format=%(refname)", "refs/heads/")
	if branches != "refs/heads/drover/f/kept/1" {
		t.Errorf("branches left in the cache:\n%s\nwant only the kept worktree's", branches)
	}
	// The swept branches are free again: an attempt with the same branch
	// prepares (it would fail with repocache.ErrBranchExists before the sweep).
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/gone-1/1", Path: paths["gone-1"]})
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	// Sweeping what is clean removes nothing.
	if removed, err := c.Sweep(context.Background(), wtDir, func(p string) bool { return p == paths["kept"] }); err != nil || len(removed) != 0 {
		t.Errorf("second sweep: removed %v, err %v", removed, err)
	}
}

// TestSweepForgetsFetchedResults: the result branches a cache fetched, for
// the merges of dependent tasks (or with the whole remote, for a large
// integration build), would pile up one per attempt; a sweep deletes them, and a task
// merging one of them later fetches it again.
func TestSweepForgetsFetchedResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	results := map[string]string{}
	for _, b := range []string{"drover/f/x/1", "drover/f/y/1"} {
		gitT(t, o.Seed, "branch", b, mainBranch)
		results[b] = o.pushNew(t, b, strings.ReplaceAll(b, "/", "-")+".txt", b+"\n")
	}
	c := newTestCache(t)
	merge := []repocache.Ref{{Branch: "drover/f/y/1", Commit: results["drover/f/y/1"]}}
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/a/1", Merge: merge})
	fetched := func() string {
		return gitT(t, "", "--git-dir="+w.repo.Dir(), "for-each-ref", "--format=%(refname)", "refs/remotes/origin/")
	}
	// The clone left the results on the remote (repocache's
	// cloneRefspecs); the merge fetched its own.
	if got := fetched(); !strings.Contains(got, "refs/remotes/origin/drover/f/y/1") || strings.Contains(got, "drover/f/x/1") {
		t.Fatalf("the new cache fetched, of the results, other than the one it merged:\n%s", got)
	}
	if _, err := c.Sweep(ctx, t.TempDir(), func(string) bool { return true }); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if got := fetched(); strings.Contains(got, "drover/") || !strings.Contains(got, "refs/remotes/origin/"+mainBranch) {
		t.Errorf("after the sweep the cache has:\n%s\nwant the base and no result branch", got)
	}
	if got := gitT(t, "", "--git-dir="+w.repo.Dir(), "rev-parse", "refs/heads/"+w.Branch); got == "" {
		t.Error("the sweep deleted the branch of a live worktree")
	}
	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/b/1", Merge: merge})
	if _, err := os.Stat(filepath.Join(w2.Path, "drover-f-y-1.txt")); err != nil {
		t.Errorf("the result merged after the sweep is missing: %v", err)
	}
}
