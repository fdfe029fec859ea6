package checkout

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

	"github.com/drover-dev/drover/internal/repocache"
)

// TestPrepareTellsMissingFromUnreachable: against real git, a repository
// or a base that does not exist is repocache.ErrRepoNotFound or repocache.ErrBaseNotFound,
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
		missing    error // repocache.ErrRepoNotFound, repocache.ErrBaseNotFound or nil (transient)
	}{
		{"missing local path", filepath.Join(t.TempDir(), "gone.git"), "main", repocache.ErrRepoNotFound},
		{"missing file URL", "file://" + filepath.Join(t.TempDir(), "gone.git"), "main", repocache.ErrRepoNotFound},
		{"local dir that is no repository", notRepo, "main", repocache.ErrRepoNotFound},
		{"missing base branch", o.URL, "no-such-branch", repocache.ErrBaseNotFound},
		{"missing base commit", o.URL, strings.Repeat("1", 40), repocache.ErrBaseNotFound},
		{"http repository the server does not have", served + "/nope.git", "main", repocache.ErrRepoNotFound},
		{"missing base over http", served + "/" + filepath.Base(o.URL), "no-such-branch", repocache.ErrBaseNotFound},
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
			repo, base := errors.Is(err, repocache.ErrRepoNotFound), errors.Is(err, repocache.ErrBaseNotFound)
			switch tc.missing {
			case repocache.ErrRepoNotFound:
				if !repo || base {
					t.Errorf("%v: want repocache.ErrRepoNotFound alone", err)
				}
			case repocache.ErrBaseNotFound:
				if repo || !base || !errors.Is(err, repocache.ErrRevisionNotFound) {
					t.Errorf("%v: want repocache.ErrBaseNotFound (a revision not found)", err)
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
	if !errors.Is(err, repocache.ErrRepoNotFound) {
		t.Errorf("a cached repository deleted since: %v, want repocache.ErrRepoNotFound", err)
	}

	// A merge branch that is not there is not the base: it may be pushed yet.
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "main", Branch: "drover/f/t/3", Path: wtPath(t),
		Merge: []repocache.Ref{{Branch: "drover/f/other/1"}}})
	if !errors.Is(err, repocache.ErrRevisionNotFound) || errors.Is(err, repocache.ErrBaseNotFound) {
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
