package repocache

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/git/gittest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const mainBranch = gittest.MainBranch

// The tests' own git runs as a user's would (internal/git/gittest).
var (
	gitT      = gittest.Run
	gitE      = gittest.Try
	writeFile = gittest.WriteFile
	wantVerbs = gittest.WantVerbs
)

func newOrigin(t testing.TB) *gittest.Origin { return gittest.NewOrigin(t) }

var testLogger = gittest.Logger

func newTestCache(t testing.TB) *Cache {
	t.Helper()
	return newTestCacheIn(t, t.TempDir())
}

func newTestCacheIn(t testing.TB, dir string) *Cache {
	t.Helper()
	return newTestCacheLogging(t, dir, testLogger(t))
}

func newTestCacheLogging(t testing.TB, dir string, log *slog.Logger) *Cache {
	t.Helper()
	g, err := git.New(git.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Dir: dir, Git: g, Logger: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// newRecordingCache is a cache whose git commands are recorded.
func newRecordingCache(t testing.TB) (*Cache, *gittest.Recorder) {
	t.Helper()
	rec := &gittest.Recorder{}
	return newTestCacheLogging(t, t.TempDir(), slog.New(rec)), rec
}

// resolve resolves req and unlocks the repository, as a checkout would
// once it has made its checkout.
func resolve(t testing.TB, c *Cache, req Request) *Resolved {
	t.Helper()
	res, err := c.Resolve(context.Background(), req)
	if err != nil {
		t.Fatalf("Resolve(%+v): %v", req, err)
	}
	res.Repo.Unlock()
	return res
}

// lockedRepo is c's repository for url, locked as Resolve locks it.
func lockedRepo(t testing.TB, c *Cache, url string) *Repo {
	t.Helper()
	r, err := c.repoFor(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func assertNotExist(t testing.TB, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (err=%v), want it gone", p, err)
	}
}
