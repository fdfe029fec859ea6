package checkout

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCreateAtNeverFollows: Drover's writes into a worktree after the
// agent ran (its .git again, the .git file back) never go through a
// symlink a process of the agent left, or put, in their way.
func TestCreateAtNeverFollows(t *testing.T) {
	t.Parallel()
	wt, victim := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(victim, "config"), "the worker's\n", 0o644)
	if err := os.Symlink(filepath.Join(victim, "config"), filepath.Join(wt, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := newFileAt(wt, ".git", []byte("gitdir: elsewhere\n")); err == nil {
		t.Error("newFileAt wrote over a symlink")
	}
	if err := os.Remove(filepath.Join(wt, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(wt, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := newDirAt(wt, ".git", map[string][]byte{"config": []byte("[core]\n"), "refs/heads/x": []byte("sha\n")}); err == nil {
		t.Error("newDirAt made its directory through a symlink")
	}
	if got := readFile(t, filepath.Join(victim, "config")); got != "the worker's\n" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if _, err := os.Stat(filepath.Join(victim, "refs")); err == nil {
		t.Error("a directory was made in the symlink's target")
	}
	// Where nothing is in the way, both work.
	fresh := t.TempDir()
	if err := newDirAt(fresh, ".git", map[string][]byte{"HEAD": []byte("ref\n"), "refs/heads/drover/x/1": []byte("sha\n"), "objects/pack/": nil}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(fresh, ".git", "refs", "heads", "drover", "x", "1")); got != "sha\n" {
		t.Errorf("branch file %q", got)
	}
	if info, err := os.Stat(filepath.Join(fresh, ".git", "objects", "pack")); err != nil || !info.IsDir() {
		t.Errorf("objects/pack: %v", err)
	}
}
