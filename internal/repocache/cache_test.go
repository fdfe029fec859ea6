package repocache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

func TestNewCacheOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Error("NewCache without Dir succeeded")
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	if _, err := New(Options{Dir: dir}); err != nil { // nil Logger is fine
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("cache dir not created: %v", err)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&RevisionNotFoundError{RepoURL: "/r", Revision: "v"},
		&RefMismatchError{Branch: "b", Want: "1", Got: "2"},
	} {
		if !strings.HasPrefix(err.Error(), "repocache: ") {
			t.Errorf("%T message %q lacks the package prefix", err, err.Error())
		}
	}
}
