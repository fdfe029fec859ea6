package worktree

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrepareTellsMissingFromUnreachable: against real git, a repository
// or a base that does not exist is ErrRepoNotFound or ErrBaseNotFound,
// which attempts report as failures retrying cannot fix; a repository that
// cannot be reached now (refused, a server error) is neither, so it is
// retried.
func TestPrepareTellsMissingFromUnreachable(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	notRepo := t.TempDir()
	writeFile(t, filepath.Join(notRepo, "README"), "not a repository\n", 0o644)
	served := serveGit(t, filepath.Dir(o.URL))
	status500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusInternalServerError)
	}))
	t.Cleanup(status500.Close)

	cases := []struct {
		name       string
		repo, base string
		missing    error // ErrRepoNotFound, ErrBaseNotFound or nil (transient)
	}{
		{"missing local path", filepath.Join(t.TempDir(), "gone.git"), "main", ErrRepoNotFound},
		{"missing file URL", "file://" + filepath.Join(t.TempDir(), "gone.git"), "main", ErrRepoNotFound},
		{"local dir that is no repository", notRepo, "main", ErrRepoNotFound},
		{"missing base branch", o.URL, "no-such-branch", ErrBaseNotFound},
		{"missing base commit", o.URL, strings.Repeat("1", 40), ErrBaseNotFound},
		{"http repository the server does not have", served + "/nope.git", "main", ErrRepoNotFound},
		{"missing base over http", served + "/" + filepath.Base(o.URL), "no-such-branch", ErrBaseNotFound},
		{"connection refused", "http://" + closedPort(t) + "/x.git", "main", nil},
		{"git daemon refused", "git://" + closedPort(t) + "/x.git", "main", nil},
		{"server error", status500.URL + "/x.git", "main", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCache(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := wtPath(t)
			_, err := c.Prepare(ctx, PrepareOptions{RepoURL: tc.repo, Base: tc.base, Branch: "drover/f/t/1", Path: p})
			if err == nil {
				t.Fatal("prepared")
			}
			repo, base := errors.Is(err, ErrRepoNotFound), errors.Is(err, ErrBaseNotFound)
			switch tc.missing {
			case ErrRepoNotFound:
				if !repo || base {
					t.Errorf("%v: want ErrRepoNotFound alone", err)
				}
			case ErrBaseNotFound:
				if repo || !base || !errors.Is(err, ErrRevisionNotFound) {
					t.Errorf("%v: want ErrBaseNotFound (a revision not found)", err)
				}
			default:
				if repo || base {
					t.Errorf("%v: a repository that cannot be reached now is not missing", err)
				}
			}
			assertNotExist(t, p)
		})
	}

	// Served once, then gone: the cache's next fetch says it is missing.
	gone := filepath.Join(t.TempDir(), "gone.git")
	gitT(t, "", "clone", "--quiet", "--bare", o.URL, gone)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: gone, Base: "main", Branch: "drover/f/t/1"})
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: gone, Base: "main", Branch: "drover/f/t/2", Path: wtPath(t)})
	if !errors.Is(err, ErrRepoNotFound) {
		t.Errorf("a cached repository deleted since: %v, want ErrRepoNotFound", err)
	}

	// A merge branch that is not there is not the base: it may be pushed yet.
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "main", Branch: "drover/f/t/3", Path: wtPath(t),
		Merge: []Ref{{Branch: "drover/f/other/1"}}})
	if !errors.Is(err, ErrRevisionNotFound) || errors.Is(err, ErrBaseNotFound) {
		t.Errorf("a missing merge branch: %v, want a revision not found that is not the base", err)
	}
}

// serveGit serves the repositories under root over git's smart HTTP
// protocol, by git's own http-backend, and returns the base URL.
func serveGit(t *testing.T, root string) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("no git-http-backend: %v", err)
	}
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
	}})
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestRepoMissingWords: git's words for a repository that is not there,
// as git and forges print them, against those for one that cannot be
// reached now, which must stay retried.
func TestRepoMissingWords(t *testing.T) {
	for _, c := range []struct {
		stderr  string
		missing bool
	}{
		{"fatal: '/srv/x.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.", true},
		{"remote: Repository not found.\nfatal: repository 'https://github.com/o/r.git/' not found", true},
		{"fatal: repository 'https://git.example.com/o/r.git/' not found", true},
		{"ssh: connect to host git.example.com port 22: Connection refused\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.", false},
		{"git@git.example.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", false},
		{"fatal: unable to access 'https://git.example.com/o/r.git/': Could not resolve host: git.example.com", false},
		{"fatal: unable to access 'https://git.example.com/o/r.git/': Operation timed out after 300000 milliseconds", false},
		{"fatal: unable to access 'https://git.example.com/o/r.git/': The requested URL returned error: 503", false},
		{"fatal: could not read Username for 'https://github.com': terminal prompts disabled", false},
		{"fatal: the remote end hung up unexpectedly", false},
	} {
		err := classifyFetch("u", &GitError{Args: []string{"fetch"}, ExitCode: 128, Stderr: c.stderr})
		if got := errors.Is(err, ErrRepoNotFound); got != c.missing {
			t.Errorf("%q: missing %v, want %v", c.stderr, got, c.missing)
		}
	}
	// A git killed (a timeout) said nothing to go by.
	if err := classifyFetch("u", &GitError{ExitCode: -1, Stderr: "does not appear to be a git repository"}); errors.Is(err, ErrRepoNotFound) {
		t.Error("a killed git's output was read")
	}
}
