package scope

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/worktree"
)

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

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testGitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s (in %s): %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

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
	cache *worktree.Cache
	wt    *worktree.Worktree
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
	cache, err := worktree.NewCache(worktree.CacheOptions{Dir: filepath.Join(root, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "worktrees"), 0o755); err != nil {
		t.Fatal(err)
	}
	wt, err := cache.Prepare(context.Background(), worktree.PrepareOptions{
		RepoURL: origin, Base: "main", Branch: "drover/f/t/1", Path: filepath.Join(root, "worktrees", "f_t_1-e1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cache.Remove(context.Background(), wt) })
	return &env{cache: cache, wt: wt, root: root}
}

func (e *env) observe(t *testing.T) *worktree.Changes {
	t.Helper()
	ch, err := e.wt.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func (e *env) path(rel string) string { return filepath.Join(e.wt.Path, filepath.FromSlash(rel)) }
