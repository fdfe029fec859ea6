package worktree

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testAuthor = "Tester <tester@example.com>"
	mainBranch = "main"
)

// testGitEnv is the environment the tests' own git commands run with:
// isolated from the developer's config like the package's, plus an author.
func testGitEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
		"GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=tester@example.com",
		"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=tester@example.com",
	}
}

// gitT runs git in dir (or with explicit --git-dir args) and returns its
// trimmed stdout, failing the test on error.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitE(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func gitE(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testGitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &testGitErr{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type testGitErr struct {
	err    error
	stderr string
}

func (e *testGitErr) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// origin is a bare repository playing the role of the remote, plus a
// working clone ("seed") used to push new commits to it.
type origin struct {
	URL  string // the bare repository's path, used as RepoURL
	Seed string
	C1   string // main~1: README.md, notes.txt, .gitignore; tags v1 (annotated) and light
	C2   string // main: + src/app.go, script.sh (executable); branch "feature" at C3
	C3   string // feature: + feature.txt
}

func newOrigin(t testing.TB) *origin {
	t.Helper()
	root := t.TempDir()
	o := &origin{Seed: filepath.Join(root, "seed"), URL: filepath.Join(root, "origin.git")}
	gitT(t, root, "init", "--quiet", "--initial-branch="+mainBranch, o.Seed)
	writeFile(t, filepath.Join(o.Seed, "README.md"), "hello\n", 0o644)
	writeFile(t, filepath.Join(o.Seed, "notes.txt"), "some notes\n", 0o644)
	writeFile(t, filepath.Join(o.Seed, ".gitignore"), "*.log\n", 0o644)
	o.C1 = o.commit(t, "first")
	gitT(t, o.Seed, "tag", "-a", "-m", "version 1", "v1")
	gitT(t, o.Seed, "tag", "light")
	writeFile(t, filepath.Join(o.Seed, "src", "app.go"), "package main\n\nfunc main() {}\n", 0o644)
	writeFile(t, filepath.Join(o.Seed, "script.sh"), "#!/bin/sh\necho hi\n", 0o755)
	o.C2 = o.commit(t, "second")
	gitT(t, o.Seed, "checkout", "--quiet", "-b", "feature")
	writeFile(t, filepath.Join(o.Seed, "feature.txt"), "feature\n", 0o644)
	o.C3 = o.commit(t, "feature work")
	gitT(t, o.Seed, "checkout", "--quiet", mainBranch)
	gitT(t, root, "clone", "--quiet", "--bare", o.Seed, o.URL)
	gitT(t, o.Seed, "remote", "add", "origin", o.URL)
	return o
}

// commit stages everything in the seed and commits it.
func (o *origin) commit(t testing.TB, msg string) string {
	t.Helper()
	gitT(t, o.Seed, "add", "-A")
	gitT(t, o.Seed, "commit", "--quiet", "-m", msg)
	return gitT(t, o.Seed, "rev-parse", "HEAD")
}

// pushNew commits a file on branch in the seed and pushes it to origin.
func (o *origin) pushNew(t testing.TB, branch, file, content string) string {
	t.Helper()
	gitT(t, o.Seed, "checkout", "--quiet", branch)
	writeFile(t, filepath.Join(o.Seed, file), content, 0o644)
	sha := o.commit(t, "add "+file)
	gitT(t, o.Seed, "push", "--quiet", "origin", branch)
	gitT(t, o.Seed, "checkout", "--quiet", mainBranch)
	return sha
}

func (o *origin) git(t testing.TB, args ...string) string {
	t.Helper()
	return gitT(t, "", append([]string{"--git-dir=" + o.URL}, args...)...)
}

// lsTree lists the files of rev in the origin.
func (o *origin) lsTree(t testing.TB, rev string) []string {
	t.Helper()
	return strings.Split(o.git(t, "ls-tree", "-r", "--name-only", rev), "\n")
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newTestCache(t testing.TB) *Cache {
	t.Helper()
	return newTestCacheIn(t, t.TempDir())
}

func newTestCacheIn(t testing.TB, dir string) *Cache {
	t.Helper()
	return newTestCacheWith(t, CacheOptions{Dir: dir})
}

// newTestCacheWith is a cache with options; Dir defaults to a temp dir.
func newTestCacheWith(t testing.TB, opts CacheOptions) *Cache {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Logger = testLogger(t)
	c, err := NewCache(opts)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	return c
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

func prepare(t testing.TB, c *Cache, opts PrepareOptions) *Worktree {
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

func writeFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile keeps an existing file's mode
		t.Fatal(err)
	}
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

// gitRecorder is a slog.Handler keeping the arguments of every git command
// a Cache runs (its debug "git" records), to count them.
type gitRecorder struct {
	mu   sync.Mutex
	cmds [][]string
}

func (g *gitRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (g *gitRecorder) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *gitRecorder) WithGroup(string) slog.Handler            { return g }

func (g *gitRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "git" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if args, ok := a.Value.Any().([]string); ok && a.Key == "args" {
			g.mu.Lock()
			g.cmds = append(g.cmds, slices.Clone(args))
			g.mu.Unlock()
		}
		return true
	})
	return nil
}

// verbs returns the git subcommand of each command recorded so far
// ("fetch", "worktree prune", ...) and forgets them.
func (g *gitRecorder) verbs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var verbs []string
	for _, args := range g.cmds {
		verbs = append(verbs, gitVerb(args))
	}
	g.cmds = nil
	return verbs
}

// gitVerb skips the global options before the subcommand; for worktree,
// the subcommand's own subcommand is kept too.
func gitVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c":
			i++
		case strings.HasPrefix(a, "--git-dir="):
		case a == "worktree" && i+1 < len(args):
			return a + " " + args[i+1]
		default:
			return a
		}
	}
	return ""
}

// newRecordingCache is a cache whose git commands are recorded.
func newRecordingCache(t testing.TB) (*Cache, *gitRecorder) {
	t.Helper()
	return newRecordingCacheWith(t, CacheOptions{})
}

// newRecordingCacheWith is newRecordingCache with options (Dir and Logger
// are set here).
func newRecordingCacheWith(t testing.TB, opts CacheOptions) (*Cache, *gitRecorder) {
	t.Helper()
	rec := &gitRecorder{}
	opts.Dir, opts.Logger = t.TempDir(), slog.New(rec)
	c, err := NewCache(opts)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	return c, rec
}

// lockedRepo is c's repository for url, locked as Prepare locks it.
func lockedRepo(t testing.TB, c *Cache, url string) *repo {
	t.Helper()
	r, err := c.repoFor(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}
