package scope

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/git/gittest"
	"github.com/drover-dev/drover/internal/repocache"
)

// The tests' own git runs as a user's would (internal/git/gittest).
var gitT = gittest.Run

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// env is a repository, a cache and one prepared worktree of it, in
// <root>/worktrees/<name> like a worker lays them out.
type env struct {
	cache *checkout.Checkouts
	wt    *checkout.Checkout
	root  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	seed := filepath.Join(root, "seed")
	gitT(t, root, "init", "--quiet", "--initial-branch=main", seed)
	writeFile(t, filepath.Join(seed, "README.md"), "hello\n")
	writeFile(t, filepath.Join(seed, "src", "app.go"), "package main\n")
	writeFile(t, filepath.Join(seed, "docs", "guide.md"), "guide\n")
	gitT(t, seed, "add", "-A")
	gitT(t, seed, "commit", "--quiet", "-m", "first")
	origin := filepath.Join(root, "origin.git")
	gitT(t, root, "clone", "--quiet", "--bare", seed, origin)
	rc, err := repocache.New(repocache.Options{Dir: filepath.Join(root, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	cache := checkout.New(rc, checkout.Options{})
	if err := os.MkdirAll(filepath.Join(root, "worktrees"), 0o755); err != nil {
		t.Fatal(err)
	}
	wt, err := cache.Prepare(context.Background(), checkout.PrepareOptions{
		RepoURL: origin, Base: "main", Branch: "drover/f/t/1", Path: filepath.Join(root, "worktrees", "f_t_1-e1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cache.Remove(context.Background(), wt) })
	return &env{cache: cache, wt: wt, root: root}
}

func (e *env) observe(t *testing.T) *checkout.Changes {
	t.Helper()
	ch, err := e.wt.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func (e *env) path(rel string) string { return filepath.Join(e.wt.Path, filepath.FromSlash(rel)) }
