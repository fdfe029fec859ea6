package checkout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// Sentinel errors. Typed errors below wrap them so callers can use
// errors.Is for the category and errors.As for the details.
var (
	// ErrMergeConflict means a dependency result could not be merged cleanly.
	ErrMergeConflict = errors.New("checkout: merge conflict")
	// ErrInvalidPath means the checkout's path is unusable (relative,
	// exists, missing parent, or inside the cache).
	ErrInvalidPath = errors.New("checkout: invalid checkout path")
	// ErrRemoved means the checkout was already removed.
	ErrRemoved = errors.New("checkout: checkout removed")
	// ErrNotPrepared means a Checkout value was not returned by Prepare.
	ErrNotPrepared = errors.New("checkout: checkout not prepared")
)

// MergeConflictError lists the paths that conflicted while merging Branch.
// The merge has been aborted by the time this is returned.
type MergeConflictError struct {
	Branch string
	Commit string
	Paths  []string // sorted, slash-separated, relative to the checkout
}

func (e *MergeConflictError) Error() string {
	return fmt.Sprintf("checkout: merge conflict merging %s (%s) in %s", e.Branch, git.ShortID(e.Commit), strings.Join(e.Paths, ", "))
}

func (e *MergeConflictError) Unwrap() error { return ErrMergeConflict }
