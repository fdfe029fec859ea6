package scope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newGuard guards e's worktree as an attempt does: the checkout package
// knows its git dirs (its .git is the agent's own repository, which git in
// the worktree would name instead).
func newGuard(t *testing.T, e *env) *Guard {
	t.Helper()
	g, err := NewGuard(e.wt.Path, GitDirs{Dir: e.wt.GitDir(), Common: e.wt.CommonDir()}, filepath.Dir(e.wt.Path))
	if err != nil {
		t.Fatal(err)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Fatalf("fresh guard: %q", v)
	}
	return g
}

func commonDir(t *testing.T, e *env) string {
	return e.wt.CommonDir()
}

// The checkout package's idea of the git dirs is git's for a checkout
// with the .git file git writes, so the guard need not ask git.
func TestGuardGivenGitDirs(t *testing.T) {
	e := newEnv(t)
	given := newGuard(t, e)
	if err := os.RemoveAll(e.path(".git")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.path(".git"), "gitdir: "+e.wt.GitDir()+"\n")
	asked, err := NewGuard(e.wt.Path, GitDirs{}, filepath.Dir(e.wt.Path))
	if err != nil {
		t.Fatal(err)
	}
	if given.GitDir() != asked.GitDir() || given.CommonDir() != asked.CommonDir() {
		t.Errorf("given dirs %s %s, git says %s %s", given.GitDir(), given.CommonDir(), asked.GitDir(), asked.CommonDir())
	}
	if _, err := NewGuard(e.wt.Path, GitDirs{Dir: "relative/dir"}); err == nil {
		t.Error("a relative git dir is accepted")
	}
}

func TestGuardHook(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	hook := filepath.Join(commonDir(t, e), "hooks", "pre-commit")
	writeFile(t, hook, "#!/bin/sh\necho pwned\n")
	got := g.Violations()
	want := []string{"`.git/hooks/pre-commit` created: " + ReasonGitInternal}
	if !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
	if g.CommonDir() != commonDir(t, e) || !strings.HasPrefix(g.GitDir(), g.CommonDir()) {
		t.Errorf("dirs %s %s", g.CommonDir(), g.GitDir())
	}
}

func TestGuardHooksPath(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	// From inside the worktree, as a CLI would: its own repository's config,
	// which only its own git reads.
	gitT(t, e.wt.Path, "config", "core.hooksPath", "/tmp/evil-hooks")
	gitT(t, e.wt.Path, "commit", "-q", "--allow-empty", "-m", "its own commit")
	if got := g.Violations(); len(got) != 0 {
		t.Errorf("the agent's own repository: %q", got)
	}
	// The shared repository's, which every attempt's git would read.
	gitT(t, e.wt.Path, "--git-dir="+e.wt.CommonDir(), "config", "core.hooksPath", "/tmp/evil-hooks")
	got := g.Violations()
	if !slices.Equal(got, []string{"`.git/config` modified: " + ReasonGitInternal}) {
		t.Errorf("got %q", got)
	}
}

func TestGuardWorktreeConfig(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	writeFile(t, filepath.Join(g.GitDir(), "config.worktree"), "[core]\n\thooksPath = /tmp/x\n")
	got := g.Violations()
	if len(got) != 1 || !strings.Contains(got[0], "config.worktree` created") || !strings.HasPrefix(got[0], "`.git/worktrees/") {
		t.Errorf("got %q", got)
	}
}

// Replacing .git (a file pointing at the shared repository's admin dir,
// a symlink) or deleting it is a violation.
func TestGuardGitFile(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	if err := os.RemoveAll(e.path(".git")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.path(".git"), "gitdir: "+e.wt.GitDir()+"\n")
	got := g.Violations()
	if !slices.Equal(got, []string{"`.git` modified: " + ReasonGitInternal}) {
		t.Errorf("got %q", got)
	}
	if err := os.Remove(e.path(".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.wt.GitDir(), e.path(".git")); err != nil {
		t.Fatal(err)
	}
	if got := g.Violations(); !slices.Equal(got, []string{"`.git` modified: " + ReasonGitInternal}) {
		t.Errorf("symlink: %q", got)
	}
	if err := os.Remove(e.path(".git")); err != nil {
		t.Fatal(err)
	}
	if got := g.Violations(); !slices.Equal(got, []string{"`.git` deleted: " + ReasonGitInternal}) {
		t.Errorf("deleted: %q", got)
	}
}

func TestGuardParentDir(t *testing.T) {
	e := newEnv(t)
	parent := filepath.Dir(e.wt.Path)
	writeFile(t, filepath.Join(parent, "existing.txt"), "before\n")
	g := newGuard(t, e)

	// Siblings come and go: directories are not reported.
	if err := os.Mkdir(filepath.Join(parent, "f_t2_1-e3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Fatalf("sibling worktree reported: %q", v)
	}
	writeFile(t, filepath.Join(parent, "escape.txt"), "out\n")
	writeFile(t, filepath.Join(parent, "existing.txt"), "after\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(parent, "link")); err != nil {
		t.Fatal(err)
	}
	got := g.Violations()
	want := []string{
		"../escape.txt created outside the worktree",
		"../existing.txt modified outside the worktree",
		"../link created outside the worktree",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestGuardIgnoresWorktreeWork(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	// Ordinary work in the worktree, commits included, is not the guard's
	// business.
	writeFile(t, e.path("new.txt"), "x\n")
	gitT(t, e.wt.Path, "add", "-A")
	gitT(t, e.wt.Path, "commit", "--quiet", "-m", "agent commit")
	if v := g.Violations(); len(v) != 0 {
		t.Errorf("violations %q", v)
	}
}
