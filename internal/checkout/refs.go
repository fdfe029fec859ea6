package checkout

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// Reading refs from their files. Every git process an attempt starts costs
// a few milliseconds, most of it git reading its index and config, and
// four of them only asked where HEAD or the attempt branch points after
// Drover itself had just moved it. Loose refs are files git writes whole
// (a lock file renamed into place), so where one exists its content is
// git's answer. Anything else — a packed ref, a symbolic ref to another
// symbolic ref, a HEAD git would read some other way — returns false, and
// the caller asks git.

// headFromFiles returns the commit HEAD points at, from the worktree's HEAD
// file and the loose ref it names (or the sha it holds, when detached).
func (w *Checkout) headFromFiles() (string, bool) {
	b, err := os.ReadFile(filepath.Join(w.gitDir, "HEAD"))
	if err != nil {
		return "", false
	}
	s := strings.TrimSuffix(string(b), "\n")
	if ref, ok := strings.CutPrefix(s, "ref: "); ok {
		return looseBranch(w.repo.Dir(), ref)
	}
	return s, git.IsObjectID(s)
}

// looseBranch reads a branch's loose ref file in a repository's common dir.
func looseBranch(commonDir, ref string) (string, bool) {
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || !git.PlainBranch(branch) {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(commonDir, "refs", "heads", filepath.FromSlash(branch)))
	if err != nil {
		return "", false
	}
	s := strings.TrimSuffix(string(b), "\n")
	return s, git.IsObjectID(s)
}
