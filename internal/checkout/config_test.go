package checkout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/repocache"
)

// writeHooks creates hooks that fail (and leave a marker) in dir.
func writeHooks(t *testing.T, dir, marker string) {
	t.Helper()
	for _, h := range []string{"pre-commit", "commit-msg", "pre-merge-commit", "post-checkout", "post-commit", "pre-push", "reference-transaction"} {
		writeFile(t, filepath.Join(dir, h), "#!/bin/sh\necho "+h+" >> '"+marker+"'\nexit 1\n", 0o755)
	}
}

// Not parallel: it changes HOME and other process environment.
func TestGlobalConfigAndEnvironmentIgnored(t *testing.T) {
	home := t.TempDir()
	marker := filepath.Join(home, "hooks-ran")
	hooks := filepath.Join(home, "hooks")
	writeHooks(t, hooks, marker)
	gitconfig := `[core]
	hooksPath = ` + hooks + `
[commit]
	gpgsign = true
[user]
	name = Global User
	email = global@example.com
[init]
	defaultBranch = wrong
[merge]
	ff = only
`
	writeFile(t, filepath.Join(home, ".gitconfig"), gitconfig, 0o644)
	writeFile(t, filepath.Join(home, ".config", "git", "config"), gitconfig, 0o644)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	// Environment that would redirect or re-identify git if it leaked through.
	t.Setenv("GIT_AUTHOR_NAME", "Env Author")
	t.Setenv("GIT_COMMITTER_NAME", "Env Committer")
	t.Setenv("GIT_INDEX_FILE", filepath.Join(home, "bogus-index"))
	t.Setenv("GIT_DIR", filepath.Join(home, "bogus-git-dir"))

	// Sanity check: this config does break a plain git commit.
	scratch := t.TempDir()
	plain := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", scratch}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		return cmd.Run()
	}
	if err := plain("init", "--quiet"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(scratch, "f"), "f", 0o644)
	if err := plain("add", "f"); err != nil {
		t.Fatal(err)
	}
	if err := plain("commit", "--quiet", "-m", "x"); err == nil {
		t.Fatal("sanity check: commit with the hostile global config succeeded; the test would prove nothing")
	}
	if err := os.Remove(marker); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}

	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	a := attempt(t, c, o, "drover/g/a/1", map[string]string{"a.txt": "a\n"})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/g/b/1", Merge: []repocache.Ref{a}})
	writeFile(t, filepath.Join(w.Path, "b.txt"), "b\n", 0o644)
	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "Created", ch.Created, []string{"b.txt"})
	sha, err := w.Checkpoint(ctx, "with hostile global config")
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if _, err := w.Push(ctx); err != nil {
		t.Fatalf("Push: %v", err)
	}
	if got := o.git(t, "log", "-1", "--format=%an <%ae>|%cn", "refs/heads/drover/g/b/1"); got != "Drover <drover@localhost>|Drover" {
		t.Errorf("pushed commit identity = %q", got)
	}
	if got := o.git(t, "rev-parse", "refs/heads/drover/g/b/1"); got != sha {
		t.Errorf("origin at %s, want %s", got, sha)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("hooks ran: %s", b)
	}
	if _, err := os.Stat(filepath.Join(home, "bogus-index")); err == nil {
		t.Error("GIT_INDEX_FILE from the environment was used")
	}
	if err := c.Remove(ctx, w); err != nil {
		t.Fatal(err)
	}
}

// The cache's local config is shared by every worktree and writable by
// agents; hooks configured there must still not run for Drover's commands.
func TestRepositoryLocalHooksIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/h/1"})
	dir := t.TempDir()
	marker := filepath.Join(dir, "hooks-ran")
	writeHooks(t, filepath.Join(dir, "hooks"), marker)
	rd := repoDir(t, c, o.URL)
	writeHooks(t, filepath.Join(rd, "hooks"), marker) // default hooks location too
	// As an agent could, from inside its worktree.
	gitT(t, w.Path, "config", "core.hooksPath", filepath.Join(dir, "hooks"))
	gitT(t, w.Path, "config", "commit.gpgsign", "true")
	gitT(t, w.Path, "config", "core.fsmonitor", filepath.Join(dir, "hooks", "pre-commit"))
	writeFile(t, filepath.Join(w.Path, "x.txt"), "x\n", 0o644)
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Checkpoint(ctx, "x"); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if _, err := w.Push(ctx); err != nil {
		t.Fatalf("Push: %v", err)
	}
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/h/2", Merge: []repocache.Ref{{Branch: "drover/h/1"}}})
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("hooks ran: %s", b)
	}
}

func TestNewCacheOptions(t *testing.T) {
	t.Parallel()
	cache, err := repocache.New(repocache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := New(cache, Options{}) // nil Logger is fine
	if c.maxDiff != DefaultMaxDiffBytes {
		t.Errorf("defaults not applied: %d", c.maxDiff)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&MergeConflictError{Branch: "b", Commit: strings.Repeat("a", 40), Paths: []string{"x", "y"}},
	} {
		if !strings.HasPrefix(err.Error(), "checkout: ") {
			t.Errorf("%T message %q lacks the package prefix", err, err.Error())
		}
	}
}
