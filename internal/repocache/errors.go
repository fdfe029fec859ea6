package repocache

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// Sentinel errors. Typed errors below wrap them so callers can use
// errors.Is for the category and errors.As for the details.
var (
	// ErrRevisionNotFound means a base revision or merge branch does not
	// exist in the repository, even after fetching.
	ErrRevisionNotFound = errors.New("repocache: revision not found")
	// ErrBaseNotFound means the base revision does not exist in the
	// repository, even after fetching (a RevisionNotFoundError with Base):
	// running again will not make it exist.
	ErrBaseNotFound = errors.New("repocache: base revision not found")
	// ErrRepoNotFound means the repository does not exist: a local path
	// that is not there or holds no repository, or a server that answers
	// it has none. Unlike a network failure (refused, timed out, a name
	// that does not resolve), trying again will not help.
	ErrRepoNotFound = errors.New("repocache: repository not found")
	// ErrRefMismatch means a merge branch exists but is not at the commit
	// the caller expected (it moved since the result was recorded).
	ErrRefMismatch = errors.New("repocache: ref not at expected commit")
	// ErrInvalidBranch means a branch name is not a valid git branch name.
	ErrInvalidBranch = errors.New("repocache: invalid branch name")
	// ErrBranchExists means the new branch already exists in the cache.
	ErrBranchExists = errors.New("repocache: branch already exists")
	// ErrInvalidRepoURL means the repository URL is empty, relative or
	// looks like a command-line option.
	ErrInvalidRepoURL = errors.New("repocache: invalid repository URL")
	// ErrInvalidRevision means a revision string is syntactically unusable.
	ErrInvalidRevision = errors.New("repocache: invalid revision")
	// ErrCacheCorrupt means a cache directory exists but is not a usable
	// clone of the expected URL.
	ErrCacheCorrupt = errors.New("repocache: cache entry corrupt")
)

// RevisionNotFoundError names the revision that could not be resolved.
type RevisionNotFoundError struct {
	RepoURL  string
	Revision string
	Base     bool // the revision is the base a checkout starts from
}

func (e *RevisionNotFoundError) Error() string {
	what := "revision"
	if e.Base {
		what = "base revision"
	}
	return fmt.Sprintf("repocache: %s %q not found in %s", what, e.Revision, e.RepoURL)
}

func (e *RevisionNotFoundError) Unwrap() []error {
	if e.Base {
		return []error{ErrRevisionNotFound, ErrBaseNotFound}
	}
	return []error{ErrRevisionNotFound}
}

// RepoNotFoundError is a repository that does not exist, with what said so.
type RepoNotFoundError struct {
	RepoURL string
	Err     error // git's failure, or the file system's
}

func (e *RepoNotFoundError) Error() string {
	why := e.Err.Error()
	var ge *git.Error
	if errors.As(e.Err, &ge) && ge.Stderr != "" {
		why, _, _ = strings.Cut(ge.Stderr, "\n") // git's first word on it
	}
	return fmt.Sprintf("repocache: repository %s does not exist (%s)", e.RepoURL, why)
}

func (e *RepoNotFoundError) Unwrap() []error { return []error{ErrRepoNotFound, e.Err} }

// repoMissing holds git's words (LC_ALL=C, see internal/git) for a
// repository that is not there, as opposed to one that cannot be reached
// now. It is the one place Drover reads git's messages for a class; the
// tests run real git against each case.
var repoMissing = []*regexp.Regexp{
	// A local path, file:// URL or ssh path that holds no repository.
	regexp.MustCompile(`does not appear to be a git repository`),
	// Smart HTTP answering 404 (git's own words, then a forge's).
	regexp.MustCompile(`(?m)^fatal: repository '[^']*' not found$`),
	regexp.MustCompile(`(?m)^remote: Repository not found\.?$`),
}

// classifyFetch makes a failed fetch of repoURL a RepoNotFoundError when
// git says the repository is not there; anything else (refused, timed out,
// a name that does not resolve, a server error) stays as it is, to be
// tried again.
func classifyFetch(repoURL string, err error) error {
	var ge *git.Error
	if !errors.As(err, &ge) || ge.ExitCode < 0 {
		return err
	}
	for _, re := range repoMissing {
		if re.MatchString(ge.Stderr) {
			return &RepoNotFoundError{RepoURL: repoURL, Err: err}
		}
	}
	return err
}

// RefMismatchError reports a merge branch that is not at the expected commit.
type RefMismatchError struct {
	Branch string
	Want   string
	Got    string
}

func (e *RefMismatchError) Error() string {
	return fmt.Sprintf("repocache: branch %s is at %s, want %s", e.Branch, git.ShortID(e.Got), git.ShortID(e.Want))
}

func (e *RefMismatchError) Unwrap() error { return ErrRefMismatch }
