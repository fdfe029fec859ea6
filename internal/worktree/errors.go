package worktree

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Sentinel errors. Typed errors below wrap them so callers can use
// errors.Is for the category and errors.As for the details.
var (
	// ErrMergeConflict means a dependency result could not be merged cleanly.
	ErrMergeConflict = errors.New("worktree: merge conflict")
	// ErrRevisionNotFound means a base revision or merge branch does not
	// exist in the repository, even after fetching.
	ErrRevisionNotFound = errors.New("worktree: revision not found")
	// ErrBaseNotFound means the base revision does not exist in the
	// repository, even after fetching (a RevisionNotFoundError with Base):
	// running again will not make it exist.
	ErrBaseNotFound = errors.New("worktree: base revision not found")
	// ErrRepoNotFound means the repository does not exist: a local path
	// that is not there or holds no repository, or a server that answers
	// it has none. Unlike a network failure (refused, timed out, a name
	// that does not resolve), trying again will not help.
	ErrRepoNotFound = errors.New("worktree: repository not found")
	// ErrRefMismatch means a merge branch exists but is not at the commit
	// the caller expected (it moved since the result was recorded).
	ErrRefMismatch = errors.New("worktree: ref not at expected commit")
	// ErrInvalidBranch means a branch name is not a valid git branch name.
	ErrInvalidBranch = errors.New("worktree: invalid branch name")
	// ErrBranchExists means the attempt branch already exists in the cache.
	ErrBranchExists = errors.New("worktree: branch already exists")
	// ErrInvalidPath means the worktree path is unusable (relative, exists,
	// missing parent, or inside the cache).
	ErrInvalidPath = errors.New("worktree: invalid worktree path")
	// ErrInvalidRepoURL means the repository URL is empty, relative or
	// looks like a command-line option.
	ErrInvalidRepoURL = errors.New("worktree: invalid repository URL")
	// ErrInvalidRevision means a revision string is syntactically unusable.
	ErrInvalidRevision = errors.New("worktree: invalid revision")
	// ErrCacheCorrupt means a cache directory exists but is not a usable
	// clone of the expected URL.
	ErrCacheCorrupt = errors.New("worktree: cache entry corrupt")
	// ErrRemoved means the worktree was already removed.
	ErrRemoved = errors.New("worktree: worktree removed")
	// ErrNotPrepared means a Worktree value was not returned by Prepare.
	ErrNotPrepared = errors.New("worktree: worktree not prepared by a cache")
	// ErrOutputTooLarge means git produced more output than Drover is
	// willing to hold in memory for that command.
	ErrOutputTooLarge = errors.New("worktree: git output too large")
)

// maxStderr bounds how much of git's stderr is kept for an error message.
const maxStderr = 4 << 10

// GitError reports a failed git invocation.
type GitError struct {
	Args     []string // git arguments, without the config overrides Drover always adds
	ExitCode int      // -1 if git did not exit normally (killed, not started)
	Stderr   string   // trimmed; at most 4 KiB (the tail is kept, where git puts the fatal line)
	Err      error    // underlying error from os/exec, or the context's error
}

func (e *GitError) Error() string {
	var b strings.Builder
	b.WriteString("worktree: git")
	for _, a := range e.Args {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	if e.ExitCode >= 0 {
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

func (e *GitError) Unwrap() error { return e.Err }

// MergeConflictError lists the paths that conflicted while merging Branch.
// The merge has been aborted by the time this is returned.
type MergeConflictError struct {
	Branch string
	Commit string
	Paths  []string // sorted, slash-separated, relative to the worktree
}

func (e *MergeConflictError) Error() string {
	return fmt.Sprintf("worktree: merge conflict merging %s (%s) in %s", e.Branch, shortSHA(e.Commit), strings.Join(e.Paths, ", "))
}

func (e *MergeConflictError) Unwrap() error { return ErrMergeConflict }

// RevisionNotFoundError names the revision that could not be resolved.
type RevisionNotFoundError struct {
	RepoURL  string
	Revision string
	Base     bool // the revision is the base a worktree starts from
}

func (e *RevisionNotFoundError) Error() string {
	what := "revision"
	if e.Base {
		what = "base revision"
	}
	return fmt.Sprintf("worktree: %s %q not found in %s", what, e.Revision, e.RepoURL)
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
	var ge *GitError
	if errors.As(e.Err, &ge) && ge.Stderr != "" {
		why, _, _ = strings.Cut(ge.Stderr, "\n") // git's first word on it
	}
	return fmt.Sprintf("worktree: repository %s does not exist (%s)", e.RepoURL, why)
}

func (e *RepoNotFoundError) Unwrap() []error { return []error{ErrRepoNotFound, e.Err} }

// repoMissing holds git's words (LC_ALL=C, see baseEnv) for a repository
// that is not there, as opposed to one that cannot be reached now. It is
// the one place Drover reads git's messages for a class; the tests run
// real git against each case.
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
	var ge *GitError
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
	return fmt.Sprintf("worktree: branch %s is at %s, want %s", e.Branch, shortSHA(e.Got), shortSHA(e.Want))
}

func (e *RefMismatchError) Unwrap() error { return ErrRefMismatch }

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
