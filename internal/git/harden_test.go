package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/git/gittest"
)

// planted is a repository whose own config says everything that would
// make git run a program of an agent's for commands Drover runs, and the
// marker file any of them writes.
type planted struct {
	dir, marker string
}

func plantRepo(t *testing.T) planted {
	t.Helper()
	root := t.TempDir()
	p := planted{dir: filepath.Join(root, "repo"), marker: filepath.Join(root, "ran")}
	gittest.Run(t, root, "init", "--quiet", "--initial-branch=main", p.dir)
	gittest.WriteFile(t, filepath.Join(p.dir, "a.txt"), "a\n", 0o644)
	gittest.Run(t, p.dir, "add", "-A")
	gittest.Run(t, p.dir, "commit", "--quiet", "-m", "first")
	script := filepath.Join(root, "evil.sh")
	gittest.WriteFile(t, script, "#!/bin/sh\necho \"$0 $*\" >> '"+p.marker+"'\nexit 1\n", 0o755)
	hooks := filepath.Join(root, "hooks")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction"} {
		gittest.WriteFile(t, filepath.Join(hooks, h), "#!/bin/sh\necho "+h+" >> '"+p.marker+"'\nexit 1\n", 0o755)
	}
	for _, kv := range [][2]string{
		{"core.hooksPath", hooks},
		{"core.fsmonitor", script},
		{"core.pager", script},
		{"core.editor", script},
		{"credential.helper", "!" + script},
		{"diff.external", script},
		{"commit.gpgsign", "true"},
		{"gpg.program", script},
	} {
		gittest.Run(t, p.dir, "config", kv[0], kv[1])
	}
	return p
}

func (p planted) ran(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(p.marker); err == nil {
		t.Errorf("a planted program ran: %s", b)
	}
}

// TestRepositoryConfigRunsNothing: hooks, fsmonitor, pager, editor,
// credential helper, external diff and signing program set in a
// repository's own config (as an agent sets them in its repository) run
// nothing for the commands Drover runs there, and the commits are
// Drover's.
func TestRepositoryConfigRunsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := plantRepo(t)
	g := newTestGit(t)
	gittest.WriteFile(t, filepath.Join(p.dir, "a.txt"), "changed\n", 0o644)
	for _, args := range [][]string{
		{"status", "--porcelain"},
		{"diff", "--no-ext-diff"},
		{"add", "--all"},
		{"commit", "--quiet", "-m", "x"},
		{"log", "-1", "-p"},
		{"checkout", "--quiet", "-b", "other"},
	} {
		if _, err := g.Run(ctx, Cmd{Dir: p.dir, Args: args}); err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
	}
	if got := gittest.Run(t, p.dir, "log", "-1", "--format=%an <%ae>|%G?"); got != "Drover <drover@localhost>|N" {
		t.Errorf("the commit is %q, want Drover's, unsigned", got)
	}
	p.ran(t)
	// The vector is real: git run as a user runs them.
	if _, err := gittest.Try(p.dir, "commit", "--allow-empty", "-q", "-m", "y"); err == nil {
		t.Error("a plain git commit with the planted config succeeded: the test proves nothing")
	}
	if _, err := os.Stat(p.marker); err != nil {
		t.Errorf("plain git ran nothing planted (the test proves nothing): %v", err)
	}
	// An external diff the config sets is not run even when a command
	// does not say --no-ext-diff: git fails to run the empty one instead.
	if err := os.Remove(p.marker); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(ctx, Cmd{Dir: p.dir, Args: []string{"diff", "HEAD~1"}}); err == nil {
		t.Error("git diff with an external diff configured succeeded")
	}
	p.ran(t)
}

// TestReplaceRefsIgnored: a replace ref shows other content under an
// object's name to every command that reads it; Drover's see the object.
func TestReplaceRefsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := plantRepo(t)
	first := gittest.Run(t, p.dir, "rev-parse", "HEAD")
	gittest.WriteFile(t, filepath.Join(p.dir, "b.txt"), "b\n", 0o644)
	gittest.Run(t, p.dir, "add", "-A")
	gittest.Run(t, p.dir, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "commit", "--quiet", "-m", "second")
	second := gittest.Run(t, p.dir, "rev-parse", "HEAD")
	gittest.Run(t, p.dir, "-c", "core.hooksPath=/dev/null", "replace", first, second)
	if got := gittest.Run(t, p.dir, "log", "-1", "--format=%s", first); got != "second" {
		t.Fatalf("plain git reads %q for the replaced commit: the test proves nothing", got)
	}
	got, err := newTestGit(t).Output(ctx, Cmd{Dir: p.dir, Args: []string{"log", "-1", "--format=%s", first}})
	if err != nil || got != "first" {
		t.Errorf("Drover's git reads %q, %v for the replaced commit, want its own subject", got, err)
	}
}

// TestRepositoryFoundOnlyInItsDirectory: a command that names no git dir
// finds a repository in its own directory, not further up the tree (where
// an agent's deleted .git would lead it), and never a bare one there (an
// agent's planted repository).
func TestRepositoryFoundOnlyInItsDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newTestGit(t)
	p := plantRepo(t)
	sub := filepath.Join(p.dir, "sub", "dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, sub, "rev-parse", "--absolute-git-dir"); got != filepath.Join(p.dir, ".git") {
		t.Fatalf("plain git found %q: the test proves nothing", got)
	}
	if got, err := g.Output(ctx, Cmd{Dir: sub, Args: []string{"rev-parse", "--absolute-git-dir"}}); err == nil {
		t.Errorf("Drover's git found %q from below it", got)
	}
	if got, err := g.Output(ctx, Cmd{Dir: p.dir, Args: []string{"rev-parse", "--absolute-git-dir"}}); err != nil || got != filepath.Join(p.dir, ".git") {
		t.Errorf("in its own directory: %q, %v", got, err)
	}

	bare := filepath.Join(t.TempDir(), "planted")
	gittest.Run(t, "", "init", "--quiet", "--bare", bare)
	if got := gittest.Run(t, bare, "rev-parse", "--absolute-git-dir"); got != bare {
		t.Fatalf("plain git found %q: the test proves nothing", got)
	}
	if got, err := g.Output(ctx, Cmd{Dir: bare, Args: []string{"rev-parse", "--absolute-git-dir"}}); err == nil {
		t.Errorf("Drover's git took the bare repository it found: %q", got)
	}
	// Named, a bare repository is what it is.
	if got, err := g.Output(ctx, Cmd{Dir: bare, GitDir: bare, Args: []string{"rev-parse", "--absolute-git-dir"}}); err != nil || got != bare {
		t.Errorf("a bare repository named: %q, %v", got, err)
	}
}

// Not parallel: it sets the process environment.
func TestEnvironmentDoesNotLeak(t *testing.T) {
	ctx := context.Background()
	p := plantRepo(t)
	other := t.TempDir()
	t.Setenv("GIT_DIR", other)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other, "index"))
	t.Setenv("GIT_AUTHOR_NAME", "Env Author")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='"+other+"'")
	g := newTestGit(t)
	if _, err := g.Run(ctx, Cmd{Dir: p.dir, Args: []string{"commit", "--allow-empty", "--quiet", "-m", "env"}}); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, p.dir, "log", "-1", "--format=%an %s"); got != "Drover env" {
		t.Errorf("the commit is %q, want Drover's in the repository of Dir", got)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("the environment's GIT_DIR was used: %v", entries)
	}
}

// TestRemoteHelpersRefused: a URL cannot make git run a program through a
// remote helper.
func TestRemoteHelpersRefused(t *testing.T) {
	t.Parallel()
	p := plantRepo(t)
	_, err := newTestGit(t).Run(context.Background(), Cmd{Dir: p.dir, Args: []string{"fetch", "ext::sh -c touch% " + p.marker}})
	var ge *Error
	if !errors.As(err, &ge) || !strings.Contains(ge.Stderr, "transport 'ext' not allowed") {
		t.Errorf("fetch from ext:: = %v, want git's refusal", err)
	}
	p.ran(t)
}
