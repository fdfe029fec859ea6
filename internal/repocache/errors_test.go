package repocache

import (
	"errors"
	"testing"

	"github.com/drover-dev/drover/internal/git"
)

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
		err := classifyFetch("u", &git.Error{Args: []string{"fetch"}, ExitCode: 128, Stderr: c.stderr})
		if got := errors.Is(err, ErrRepoNotFound); got != c.missing {
			t.Errorf("%q: missing %v, want %v", c.stderr, got, c.missing)
		}
	}
	// A git killed (a timeout) said nothing to go by.
	if err := classifyFetch("u", &git.Error{ExitCode: -1, Stderr: "does not appear to be a git repository"}); errors.Is(err, ErrRepoNotFound) {
		t.Error("a killed git's output was read")
	}
}
