package scope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newGuard(t *testing.T, e *env) *Guard {
	t.Helper()
	g, err := NewGuard(e.wt.Path, GitDirs{}, filepath.Dir(e.wt.Path))
	if err != nil {
		t.Fatal(err)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Fatalf("fresh guard: %q", v)
	}
	return g
}

func commonDir(t *testing.T, e *env) string {
	return gitT(t, e.wt.Path, "rev-parse", "--path-format=absolute", "--git-common-dir")
}

// The worktree package's idea of the git dirs is git's, so the guard need
// not ask git.
func TestGuardGivenGitDirs(t *testing.T) {
	e := newEnv(t)
	asked := newGuard(t, e)
	given, err := NewGuard(e.wt.Path, GitDirs{Dir: e.wt.GitDir(), Common: e.wt.CommonDir()}, filepath.Dir(e.wt.Path))
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
	// From inside the worktree, as a CLI would.
	gitT(t, e.wt.Path, "config", "core.hooksPath", "/tmp/evil-hooks")
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

func TestGuardGitFile(t *testing.T) {
	e := newEnv(t)
	g := newGuard(t, e)
	writeFile(t, e.path(".git"), "gitdir: /tmp/elsewhere\n")
	got := g.Violations()
	if !slices.Equal(got, []string{"`.git` modified: " + ReasonGitInternal}) {
		t.Errorf("got %q", got)
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
