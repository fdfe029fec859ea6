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

func TestReadGitFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	common := filepath.Join(root, "repo.git")
	gitDir := filepath.Join(common, "worktrees", "wt")
	if err := os.MkdirAll(gitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(common, "worktrees", "file"), "", 0o644)
	if err := os.Symlink(gitDir, filepath.Join(common, "worktrees", "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, content, want string
	}{
		{"as git writes it", "gitdir: " + gitDir + "\n", gitDir},
		{"no newline", "gitdir: " + gitDir, gitDir},
		{"not clean", "gitdir: " + common + "/worktrees/./wt/\n", gitDir},
		{"symlink resolved", "gitdir: " + filepath.Join(common, "worktrees", "link") + "\n", gitDir},
		{"relative", "gitdir: repo.git/worktrees/wt\n", ""},
		{"outside the repository", "gitdir: " + root + "\n", ""},
		{"escaping the repository", "gitdir: " + gitDir + "/../../..\n", ""},
		{"missing", "gitdir: " + gitDir + "-gone\n", ""},
		{"a file", "gitdir: " + filepath.Join(common, "worktrees", "file") + "\n", ""},
		{"two lines", "gitdir: " + gitDir + "\nx\n", ""},
		{"CRLF", "gitdir: " + gitDir + "\r\n", ""},
		{"other syntax", "gitdir:" + gitDir + "\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		f := filepath.Join(t.TempDir(), ".git")
		writeFile(t, f, tt.content, 0o644)
		got, ok := readGitFile(f, common)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: readGitFile = %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}
	if got, ok := readGitFile(filepath.Join(root, "none"), common); ok {
		t.Errorf("no .git file: readGitFile = %q, true", got)
	}
}
