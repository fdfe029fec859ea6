package worktree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// When git cannot remove the worktree, the directory is deleted by hand and
// git told to forget it.
func TestRemoveFallbackPrunes(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c, rec := newRecordingCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/rm/1"})
	if err := os.Remove(filepath.Join(w.Path, ".git")); err != nil {
		t.Fatal(err)
	}
	rec.verbs()
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Remove", "worktree remove", "worktree prune", "update-ref")
	rd, _ := c.RepoDir(o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "worktree", "list", "--porcelain"); strings.Contains(got, w.Path) {
		t.Errorf("worktree list still shows %s:\n%s", w.Path, got)
	}
}

func wantVerbs(t *testing.T, rec *gitRecorder, what string, want ...string) {
	t.Helper()
	if got := rec.verbs(); !slices.Equal(got, want) {
		t.Errorf("%s ran git %q, want %q", what, got, want)
	}
}
