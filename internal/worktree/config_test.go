package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/g/b/1", Merge: []Ref{a}})
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
	rd, _ := c.RepoDir(o.URL)
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
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/h/2", Merge: []Ref{{Branch: "drover/h/1"}}})
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("hooks ran: %s", b)
	}
}

func TestNewCacheOptions(t *testing.T) {
	t.Parallel()
	if _, err := NewCache(CacheOptions{}); err == nil {
		t.Error("NewCache without Dir succeeded")
	}
	if _, err := NewCache(CacheOptions{Dir: t.TempDir(), Git: "/no/such/git"}); err == nil {
		t.Error("NewCache with a missing git binary succeeded")
	}
	if _, err := NewCache(CacheOptions{Dir: t.TempDir(), Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("NewCache with a malformed Env entry succeeded")
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	c, err := NewCache(CacheOptions{Dir: dir}) // nil Logger is fine
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("cache dir not created: %v", err)
	}
	if c.authorName != DefaultAuthorName || c.authorEmail != DefaultAuthorEmail || c.maxDiff != DefaultMaxDiffBytes {
		t.Errorf("defaults not applied: %q %q %d", c.authorName, c.authorEmail, c.maxDiff)
	}
}

func TestRepoDirName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"https://github.com/drover-dev/drover.git": "-drover.git",
		"git@github.com:drover-dev/drover.git":     "-drover.git",
		"/srv/repos/My Repo/":                      "-My_Repo.git",
		"ssh://host/":                              "-host.git",
		"file:///x/.git":                           "-repo.git",
	}
	seen := map[string]bool{}
	for u, suffix := range tests {
		n := repoDirName(u)
		if !strings.HasSuffix(n, suffix) || len(n) != 16+len(suffix) {
			t.Errorf("repoDirName(%q) = %q, want <16 hex>%s", u, n, suffix)
		}
		if n != repoDirName(u) {
			t.Errorf("repoDirName(%q) not stable", u)
		}
		if seen[n] {
			t.Errorf("repoDirName(%q) = %q collides", u, n)
		}
		seen[n] = true
	}
	if repoDirName("https://a/x.git") == repoDirName("https://b/x.git") {
		t.Error("different URLs with the same name share a cache dir")
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"/abs/path/":                  "/abs/path",
		"/abs/./path":                 "/abs/path",
		"https://example.com/r.git":   "https://example.com/r.git",
		"git@example.com:o/r.git":     "git@example.com:o/r.git",
		"file:///srv/r.git":           "file:///srv/r.git",
		"ssh://git@example.com/r":     "ssh://git@example.com/r",
		"host.example.com:path/r.git": "host.example.com:path/r.git",
	}
	for in, want := range ok {
		got, err := normalizeURL(in)
		if err != nil || got != want {
			t.Errorf("normalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "rel/path", "./x", "-x", "a/b:c", "/x\n"} {
		if _, err := normalizeURL(in); !errors.Is(err, ErrInvalidRepoURL) {
			t.Errorf("normalizeURL(%q) err = %v, want ErrInvalidRepoURL", in, err)
		}
	}
}

func TestGitErrorStderrBounded(t *testing.T) {
	t.Parallel()
	c := newTestCache(t)
	// git echoes the bad revision into its error message.
	long := strings.Repeat("x", 3*maxStderr)
	_, err := c.run(context.Background(), gitRun{args: []string{"--git-dir=/nonexistent", "rev-parse", long + "\nlast line"}})
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v, want *GitError", err)
	}
	if len(ge.Stderr) > maxStderr {
		t.Errorf("len(Stderr) = %d, want <= %d", len(ge.Stderr), maxStderr)
	}
	if ge.ExitCode != 128 {
		t.Errorf("ExitCode = %d, want 128", ge.ExitCode)
	}
	if !strings.HasPrefix(ge.Error(), "worktree: git --git-dir=/nonexistent rev-parse") {
		t.Errorf("Error() = %.80q", ge.Error())
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{limit: 10}
	b.Write([]byte("12345"))
	if b.String() != "12345" {
		t.Errorf("short = %q", b.String())
	}
	b.Write([]byte("6789\nabcdef"))
	if got := b.String(); got != "...abcdef" {
		t.Errorf("tail = %q, want ...abcdef", got)
	}
	b = &tailBuffer{limit: 4}
	b.Write([]byte(strings.Repeat("z", 100)))
	if len(b.buf) != 4 {
		t.Errorf("kept %d bytes, want 4", len(b.buf))
	}
}

func TestLimitedBuffer(t *testing.T) {
	t.Parallel()
	b := &limitedBuffer{limit: 5}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; must report success so git is not killed", s, n, err)
		}
	}
	if b.buf.String() != "abcde" || !b.truncated {
		t.Errorf("buf = %q, truncated = %v", b.buf.String(), b.truncated)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&MergeConflictError{Branch: "b", Commit: strings.Repeat("a", 40), Paths: []string{"x", "y"}},
		&RevisionNotFoundError{RepoURL: "/r", Revision: "v"},
		&RefMismatchError{Branch: "b", Want: "1", Got: "2"},
		&GitError{Args: []string{"fetch"}, ExitCode: -1, Err: context.Canceled},
	} {
		if !strings.HasPrefix(err.Error(), "worktree: ") {
			t.Errorf("%T message %q lacks the package prefix", err, err.Error())
		}
	}
	if !errors.Is(&GitError{Err: context.Canceled}, context.Canceled) {
		t.Error("GitError does not unwrap to its cause")
	}
}

func TestNewCacheRemovesStaleClones(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := filepath.Join(dir, cloneTempPrefix+"abc-origin.git-1")
	fresh := filepath.Join(dir, cloneTempPrefix+"abc-origin.git-2")
	for _, d := range []string{stale, fresh} {
		writeFile(t, filepath.Join(d, "HEAD"), "ref: refs/heads/main\n", 0o644)
	}
	old := time.Now().Add(-2 * staleCloneAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	newTestCacheIn(t, dir)
	assertNotExist(t, stale)
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a clone possibly still in progress was removed: %v", err)
	}
}
