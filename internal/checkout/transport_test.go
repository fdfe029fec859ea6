package checkout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/repocache"
)

// TestPrepareRefusesRemoteHelpers: a repository URL cannot make git run a
// program, neither through the transport::address syntax nor through a
// scheme git would hand to a remote helper; the command never runs.
func TestPrepareRefusesRemoteHelpers(t *testing.T) {
	t.Parallel()
	c := newTestCache(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, u := range []string{
		"ext::sh -c touch% " + marker,
		"ext::/bin/touch " + marker,
		"fd::3",
		"EXT::sh",
		"--upload-pack=touch " + marker,
	} {
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: u, Base: mainBranch, Branch: "drover/x/1", Path: wtPath(t)})
		if !errors.Is(err, repocache.ErrInvalidRepoURL) {
			t.Errorf("url %q: err = %v, want repocache.ErrInvalidRepoURL", u, err)
		}
	}
	// A scheme without a built-in transport reaches git, which refuses it:
	// GIT_ALLOW_PROTOCOL lists git's own transports only.
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: "evil://host/repo", Base: mainBranch, Branch: "drover/x/2", Path: wtPath(t)})
	if err == nil || !strings.Contains(err.Error(), "transport 'evil' not allowed") {
		t.Errorf("evil:// URL: %v, want git's refusal of the transport", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a repository URL ran a command")
	}
}

// TestAllowProtocolFromEnvironment: a worker's operator narrows the
// transports with GIT_ALLOW_PROTOCOL, e.g. to refuse local repositories.
func TestAllowProtocolFromEnvironment(t *testing.T) {
	o := newOrigin(t)
	t.Setenv("GIT_ALLOW_PROTOCOL", "https:ssh")
	c := newTestCache(t)
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/x/1", Path: wtPath(t)})
	if err == nil || !strings.Contains(err.Error(), "transport 'file' not allowed") {
		t.Errorf("local repo with GIT_ALLOW_PROTOCOL=https:ssh: %v, want git's refusal", err)
	}
	t.Setenv("GIT_ALLOW_PROTOCOL", "file")
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/x/2"})
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}
