package gittest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MainBranch is the origin's default branch.
const MainBranch = "main"

// Env is the environment the tests' own git commands run with: isolated
// from the developer's config as Drover's are, plus an author.
func Env() []string {
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

// Run runs git in dir (or with explicit --git-dir args) and returns its
// trimmed stdout, failing the test on error.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Try(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

// Try runs git in dir and returns its trimmed stdout, or an error with its
// stderr.
func Try(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &runError{err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type runError struct {
	err    error
	stderr string
}

func (e *runError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// Origin is a bare repository playing the role of the remote, plus a
// working clone ("seed") used to push new commits to it.
type Origin struct {
	URL  string // the bare repository's path, used as a repository URL
	Seed string
	C1   string // main~1: README.md, notes.txt, .gitignore; tags v1 (annotated) and light
	C2   string // main: + src/app.go, script.sh (executable); branch "feature" at C3
	C3   string // feature: + feature.txt
}

// NewOrigin makes an Origin in a temporary directory of t.
func NewOrigin(t testing.TB) *Origin {
	t.Helper()
	root := t.TempDir()
	o := &Origin{Seed: filepath.Join(root, "seed"), URL: filepath.Join(root, "origin.git")}
	Run(t, root, "init", "--quiet", "--initial-branch="+MainBranch, o.Seed)
	WriteFile(t, filepath.Join(o.Seed, "README.md"), "hello\n", 0o644)
	WriteFile(t, filepath.Join(o.Seed, "notes.txt"), "some notes\n", 0o644)
	WriteFile(t, filepath.Join(o.Seed, ".gitignore"), "*.log\n", 0o644)
	o.C1 = o.Commit(t, "first")
	Run(t, o.Seed, "tag", "-a", "-m", "version 1", "v1")
	Run(t, o.Seed, "tag", "light")
	WriteFile(t, filepath.Join(o.Seed, "src", "app.go"), "package main\n\nfunc main() {}\n", 0o644)
	WriteFile(t, filepath.Join(o.Seed, "script.sh"), "#!/bin/sh\necho hi\n", 0o755)
	o.C2 = o.Commit(t, "second")
	Run(t, o.Seed, "checkout", "--quiet", "-b", "feature")
	WriteFile(t, filepath.Join(o.Seed, "feature.txt"), "feature\n", 0o644)
	o.C3 = o.Commit(t, "feature work")
	Run(t, o.Seed, "checkout", "--quiet", MainBranch)
	Run(t, root, "clone", "--quiet", "--bare", o.Seed, o.URL)
	Run(t, o.Seed, "remote", "add", "origin", o.URL)
	return o
}

// Commit stages everything in the seed and commits it.
func (o *Origin) Commit(t testing.TB, msg string) string {
	t.Helper()
	Run(t, o.Seed, "add", "-A")
	Run(t, o.Seed, "commit", "--quiet", "-m", msg)
	return Run(t, o.Seed, "rev-parse", "HEAD")
}

// PushNew commits a file on branch in the seed and pushes it to origin.
func (o *Origin) PushNew(t testing.TB, branch, file, content string) string {
	t.Helper()
	Run(t, o.Seed, "checkout", "--quiet", branch)
	WriteFile(t, filepath.Join(o.Seed, file), content, 0o644)
	sha := o.Commit(t, "add "+file)
	Run(t, o.Seed, "push", "--quiet", "origin", branch)
	Run(t, o.Seed, "checkout", "--quiet", MainBranch)
	return sha
}

// Git runs git in the origin's bare repository.
func (o *Origin) Git(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, "", append([]string{"--git-dir=" + o.URL}, args...)...)
}

// LsTree lists the files of rev in the origin.
func (o *Origin) LsTree(t testing.TB, rev string) []string {
	t.Helper()
	return strings.Split(o.Git(t, "ls-tree", "-r", "--name-only", rev), "\n")
}

// WriteFile writes p with content and mode, making its directories.
func WriteFile(t testing.TB, p, content string, mode os.FileMode) {
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
