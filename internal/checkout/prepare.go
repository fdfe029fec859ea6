package checkout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/repocache"
)

// Prepare resolves what opts asks of the repo cache, then checks it out:
// a checkout on a new branch at Base (a parked one reused, or a fresh
// `git worktree add`), opts.Merge merged in order, the agent's repository
// made, and the baseline recorded for Observe. On any error nothing is
// left behind: no directory, no branch.
func (cs *Checkouts) Prepare(ctx context.Context, opts PrepareOptions) (*Checkout, error) {
	path, err := cs.checkPath(opts.Path)
	if err != nil {
		return nil, err
	}
	res, err := cs.cache.Resolve(ctx, repocache.Request{URL: opts.RepoURL, Base: opts.Base, Branch: opts.Branch, Merge: opts.Merge})
	if err != nil {
		return nil, err
	}
	w, err := cs.checkOut(ctx, res, opts.Branch, path)
	if err != nil {
		return nil, err
	}
	w.shownResults, w.hideResults = shownResults(opts.Branch, opts.Base, opts.Merge)
	if err := w.finish(ctx, opts, res.Merge); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cErr := cs.Remove(cctx, w); cErr != nil {
			cs.log.WarnContext(ctx, "cleanup after failed prepare", "path", w.Path, "err", cErr)
		}
		return nil, err
	}
	cs.log.InfoContext(ctx, "worktree prepared", "url", res.Repo.URL(), "path", w.Path, "branch", w.Branch,
		"base", w.BaseCommit, "baseline", w.Baseline, "merged", len(opts.Merge))
	return w, nil
}

// finish does what Prepare does once the checkout exists, without the
// repository's lock: merges touch only this checkout's branch and index,
// and add objects.
func (w *Checkout) finish(ctx context.Context, opts PrepareOptions, merges []string) error {
	head, err := w.mergeAll(ctx, opts.Merge, merges)
	if err != nil {
		return err
	}
	if !opts.NoAgent {
		w.agentGit = true
		if err := w.makeAgentGitDir(head); err != nil {
			return err
		}
	}
	snap := w.parked.at(head, w.BaseCommit)
	if snap == nil {
		if snap, err = takeSnapshot(ctx, w.Path, w.gitDir, w.reused); err != nil {
			return err
		}
	}
	w.Baseline = head
	w.baseline, w.reused, w.parked = snap, nil, nil
	return nil
}

// checkPath validates the checkout's path and returns it cleaned.
func (cs *Checkouts) checkPath(p string) (string, error) {
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not absolute", ErrInvalidPath, p)
	}
	p = filepath.Clean(p)
	if _, err := os.Lstat(p); err == nil {
		return "", fmt.Errorf("%w: %s already exists", ErrInvalidPath, p)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %w", ErrInvalidPath, err)
	}
	parent := filepath.Dir(p)
	info, err := os.Stat(parent)
	if err != nil {
		return "", fmt.Errorf("%w: parent: %w", ErrInvalidPath, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%w: parent %s is not a directory", ErrInvalidPath, parent)
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", fmt.Errorf("%w: parent: %w", ErrInvalidPath, err)
	}
	// A checkout inside the cache could be mistaken for, or clobber, a
	// cached repository.
	if dir := cs.cache.Dir(); within(dir, filepath.Join(realParent, filepath.Base(p))) {
		return "", fmt.Errorf("%w: %s is inside the cache dir %s", ErrInvalidPath, p, dir)
	}
	return p, nil
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}
