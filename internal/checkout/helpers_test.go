package checkout

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"
	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/git/gittest"
	"github.com/drover-dev/drover/internal/repocache"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testAuthor = "Tester <tester@example.com>"
	mainBranch = gittest.MainBranch
)

// listRefsFrom is how many results a Prepare merges for the repo cache to
// read their branches in one process (repocache's constant of that name).
const listRefsFrom = 8

// The tests' own git runs as a user's would (internal/git/gittest).
var (
	gitT      = gittest.Run
	gitE      = gittest.Try
	writeFile = gittest.WriteFile
	wantVerbs = gittest.WantVerbs
)

// origin is gittest's Origin, with the names these tests were written
// with.
type origin struct{ *gittest.Origin }

func newOrigin(t testing.TB) *origin { return &origin{gittest.NewOrigin(t)} }

func (o *origin) commit(t testing.TB, msg string) string { t.Helper(); return o.Commit(t, msg) }

func (o *origin) pushNew(t testing.TB, branch, file, content string) string {
	t.Helper()
	return o.PushNew(t, branch, file, content)
}

func (o *origin) git(t testing.TB, args ...string) string { t.Helper(); return o.Git(t, args...) }

func (o *origin) lsTree(t testing.TB, rev string) []string { t.Helper(); return o.LsTree(t, rev) }

var testLogger = gittest.Logger

func newTestCache(t testing.TB) *Checkouts {
	t.Helper()
	return newTestCacheIn(t, t.TempDir())
}

func newTestCacheIn(t testing.TB, dir string) *Checkouts {
	t.Helper()
	return newTestCacheWith(t, testOptions{Dir: dir})
}

// testOptions are the options of the git, the repo cache and the
// checkouts a test makes, in one.
type testOptions struct {
	Dir                     string // defaults to a temp dir
	Git                     string
	Env                     []string // git.Options.Env
	AuthorName, AuthorEmail string
	MaxDiffBytes            int64
	IdleWorktrees           int
	Confine                 func(cmd *exec.Cmd, read []string) (func(), error)
	BatchMerges             int
	Logger                  *slog.Logger // defaults to the test's output
}

// newTestCacheWith is checkouts with options on a cache of their own.
func newTestCacheWith(t testing.TB, opts testOptions) *Checkouts {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	g, err := git.New(git.Options{Git: opts.Git, Env: opts.Env, AuthorName: opts.AuthorName, AuthorEmail: opts.AuthorEmail, Logger: opts.Logger})
	if err != nil {
		t.Fatalf("git.New: %v", err)
	}
	cache, err := repocache.New(repocache.Options{Dir: opts.Dir, Git: g, Logger: opts.Logger})
	if err != nil {
		t.Fatalf("repocache.New: %v", err)
	}
	return New(cache, Options{MaxDiffBytes: opts.MaxDiffBytes, IdleCheckouts: opts.IdleWorktrees,
		Confine: opts.Confine, BatchMerges: opts.BatchMerges, Logger: opts.Logger})
}

// oldGit returns a git that answers `git version` as 2.37 does, the last
// release without `merge-tree --write-tree`, and is the real git for every
// other command: a cache using it merges as it must with an older git.
func oldGit(t testing.TB) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	if real, err = filepath.Abs(real); err != nil {
		t.Fatal(err)
	}
	// The command is the first argument after the -c NAME=VALUE pairs.
	script := `#!/bin/sh
skip=
for a; do
	if [ -n "$skip" ]; then skip=; continue; fi
	case "$a" in
	-c) skip=1 ;;
	version) echo "git version 2.37.7"; exit 0 ;;
	*) break ;;
	esac
done
exec '` + real + `' "$@"
`
	p := filepath.Join(t.TempDir(), "git")
	if err := exectest.WriteExecutable(p, []byte(script)); err != nil {
		t.Fatal(err)
	}
	return p
}

// wtPath returns a fresh, not yet existing path for a worktree.
func wtPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "wt")
}

func prepare(t testing.TB, c *Checkouts, opts PrepareOptions) *Checkout {
	t.Helper()
	if opts.Path == "" {
		opts.Path = wtPath(t)
	}
	w, err := c.Prepare(context.Background(), opts)
	if err != nil {
		t.Fatalf("Prepare(%+v): %v", opts, err)
	}
	return w
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func assertStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if got == nil {
		got = []string{}
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func assertContains(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q; got:\n%s", what, sub, s)
		}
	}
}

func assertNotExist(t testing.TB, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (err=%v), want it gone", p, err)
	}
}

// newRecordingCache is checkouts whose git commands are recorded.
func newRecordingCache(t testing.TB) (*Checkouts, *gittest.Recorder) {
	t.Helper()
	return newRecordingCacheWith(t, testOptions{})
}

// newRecordingCacheWith is newRecordingCache with options (Logger is set
// here).
func newRecordingCacheWith(t testing.TB, opts testOptions) (*Checkouts, *gittest.Recorder) {
	t.Helper()
	rec := &gittest.Recorder{}
	opts.Logger = slog.New(rec)
	return newTestCacheWith(t, opts), rec
}

// lockedRepo is c's repository for url, locked as Prepare locks it: the
// cache resolves it (cloning it first if need be) and hands it locked.
func lockedRepo(t testing.TB, c *Checkouts, url string) *repocache.Repo {
	t.Helper()
	res, err := c.cache.Resolve(context.Background(), repocache.Request{URL: url, Branch: "drover/test/locked"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Repo
}

// repoDir is where c's cache keeps the clone of url.
func repoDir(t testing.TB, c *Checkouts, url string) string {
	t.Helper()
	d, err := c.cache.RepoDir(url)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
