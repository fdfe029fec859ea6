package worktree

import (
	"errors"
	"fmt"
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
}

func (e *RevisionNotFoundError) Error() string {
	return fmt.Sprintf("worktree: revision %q not found in %s", e.Revision, e.RepoURL)
}

func (e *RevisionNotFoundError) Unwrap() error { return ErrRevisionNotFound }

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
