package scope

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGuardAsksGitOnlyAboutTheWorktree: given no git dirs, the guard asks
// git, in the worktree, for them; git runs hardened (internal/git), so
// what an agent wrote in a worktree cannot have it guard some other
// repository: with the worktree's .git deleted git looks no further up
// the tree (here the worktrees' parent is a repository), and a bare
// repository planted in the worktree is not taken for the worktree's.
// Nothing the agent's own repository's config names runs. The guard ran
// git with two of git's settings before internal/git, and took both
// repositories.
func TestGuardAsksGitOnlyAboutTheWorktree(t *testing.T) {
	t.Run("a repository above the worktree", func(t *testing.T) {
		e := newEnv(t)
		gitT(t, "", "init", "--quiet", filepath.Dir(e.wt.Path))
		if err := os.RemoveAll(e.path(".git")); err != nil {
			t.Fatal(err)
		}
		if g, err := NewGuard(e.wt.Path, GitDirs{}); err == nil {
			t.Errorf("the guard watches %s, a repository above the worktree", g.CommonDir())
		}
	})
	t.Run("a bare repository planted in the worktree", func(t *testing.T) {
		e := newEnv(t)
		if err := os.RemoveAll(e.path(".git")); err != nil {
			t.Fatal(err)
		}
		gitT(t, "", "init", "--quiet", "--bare", e.wt.Path)
		if g, err := NewGuard(e.wt.Path, GitDirs{}); err == nil {
			t.Errorf("the guard watches %s, a repository the agent planted", g.CommonDir())
		}
	})
	t.Run("the agent's repository's config", func(t *testing.T) {
		e := newEnv(t)
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		script := filepath.Join(dir, "evil.sh")
		writeFile(t, script, "#!/bin/sh\necho \"$0 $*\" >> '"+marker+"'\n")
		if err := os.Chmod(script, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, kv := range [][2]string{{"core.fsmonitor", script}, {"core.hooksPath", dir}, {"core.pager", script}} {
			gitT(t, e.wt.Path, "config", kv[0], kv[1])
		}
		writeFile(t, filepath.Join(dir, "reference-transaction"), "#!/bin/sh\ntouch '"+marker+"'\n")
		g, err := NewGuard(e.wt.Path, GitDirs{})
		if err != nil {
			t.Fatal(err)
		}
		// The agent's .git is the worktree's repository, as git names it.
		if g.GitDir() != e.path(".git") {
			t.Errorf("git dir %s, want the agent's %s", g.GitDir(), e.path(".git"))
		}
		if b, err := os.ReadFile(marker); err == nil {
			t.Errorf("a planted program ran: %s", b)
		}
	})
}
