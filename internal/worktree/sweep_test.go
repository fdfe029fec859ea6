package worktree

import (
	"context"
	"path/filepath"
	"testing"
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
	repoDir, err := c.RepoDir(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	branches := gitT(t, "", "--git-dir="+repoDir, "for-each-ref", "--format=%(refname)", "refs/heads/")
	if branches != "refs/heads/drover/f/kept/1" {
		t.Errorf("branches left in the cache:\n%s\nwant only the kept worktree's", branches)
	}
	// The swept branches are free again: an attempt with the same branch
	// prepares (it would fail with ErrBranchExists before the sweep).
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/gone-1/1", Path: paths["gone-1"]})
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	// Sweeping what is clean removes nothing.
	if removed, err := c.Sweep(context.Background(), wtDir, func(p string) bool { return p == paths["kept"] }); err != nil || len(removed) != 0 {
		t.Errorf("second sweep: removed %v, err %v", removed, err)
	}
}
