package repocache

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// Request is what a checkout needs of a repository.
type Request struct {
	URL    string // a git URL or absolute local path (bare or not)
	Base   string // branch, tag, sha, or "HEAD" (= the remote's default branch); "" means "HEAD"
	Branch string // the checkout's branch, which must not exist in the cache yet
	Merge  []Ref  // results to merge, in order
}

// Ref is a result branch on the remote, expected to be at Commit.
// An empty Commit accepts whatever the branch points at.
type Ref struct{ Branch, Commit string }

// check validates a Request and returns its repository.
func (c *Cache) check(ctx context.Context, req Request) (*Repo, error) {
	r, err := c.repoFor(req.URL)
	if err != nil {
		return nil, err
	}
	if err := c.checkBranch(ctx, req.Branch); err != nil {
		return nil, err
	}
	for _, m := range req.Merge {
		if err := c.checkBranch(ctx, m.Branch); err != nil {
			return nil, fmt.Errorf("repocache: merge ref: %w", err)
		}
		if m.Commit != "" && !git.IsHex(m.Commit) {
			return nil, fmt.Errorf("%w: merge commit %q for %s", ErrInvalidRevision, m.Commit, m.Branch)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err // checkBranch may not have run git to notice
	}
	return r, nil
}

// checkBranch validates a branch name, and refuses names git would expand
// (like @{-1}) rather than take literally. Plain names are checked here;
// git itself judges the rest.
func (c *Cache) checkBranch(ctx context.Context, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("%w: %q", ErrInvalidBranch, branch)
	}
	if git.PlainBranch(branch) {
		return nil
	}
	return c.checkBranchGit(ctx, branch)
}

// checkBranchGit asks `git check-ref-format --branch`.
func (c *Cache) checkBranchGit(ctx context.Context, branch string) error {
	out, err := c.git.Output(ctx, git.In(c.dir, "check-ref-format", "--branch", branch))
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %q: %w", ErrInvalidBranch, branch, err)
	}
	if out != branch {
		return fmt.Errorf("%w: %q expands to %q", ErrInvalidBranch, branch, out)
	}
	return nil
}
