package checkout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

// Remove deletes the checkout's directory, its git metadata and its local
// branch in the cache, then checks the cache (repocache.Repo.Check). The
// pushed branch on the remote is left alone. Removing an already removed
// checkout is a no-op.
func (cs *Checkouts) Remove(ctx context.Context, w *Checkout) error {
	if w == nil || w.cs == nil || w.repo == nil {
		return ErrNotPrepared
	}
	if w.cs != cs {
		return errors.New("checkout: Remove called on other Checkouts than Prepare")
	}
	if err := w.repo.Lock(ctx); err != nil {
		return err
	}
	defer w.repo.Unlock()
	if w.removed.Load() {
		return nil
	}
	if err := w.restoreGitFile(); err != nil {
		cs.log.DebugContext(ctx, "restore .git before removing", "path", w.Path, "err", err)
	}
	if err := cs.removeLocked(ctx, w.repo, w.Path, w.Branch, true); err != nil {
		return err
	}
	w.removed.Store(true)
	w.repo.Check(ctx)
	return nil
}

// removeLocked removes a worktree and its branch (none if branch is "");
// caller holds r's lock.
// ownDir says path is known to be a directory this package created, so it
// may be deleted even when git no longer recognises it as a worktree.
func (cs *Checkouts) removeLocked(ctx context.Context, r *repocache.Repo, path, branch string, ownDir bool) error {
	gd := "--git-dir=" + r.Dir()
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), gd, "worktree", "remove", "--force", "--force", path)); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// git refuses when the .git file is gone or the path is no longer
		// a registered worktree.
		cs.log.DebugContext(ctx, "git worktree remove failed", "path", path, "err", err, "remove_dir", ownDir)
		if ownDir {
			if rmErr := os.RemoveAll(path); rmErr != nil {
				return fmt.Errorf("checkout: remove %s: %w", path, rmErr)
			}
		}
		// git still lists the worktree; a successful remove forgot it
		// already (and Sweep prunes whatever else is stale).
		if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), gd, "worktree", "prune")); err != nil {
			return fmt.Errorf("checkout: prune: %w", err)
		}
	}
	if branch == "" {
		return nil
	}
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), gd, "update-ref", "-d", "refs/heads/"+branch)); err != nil {
		return fmt.Errorf("checkout: delete branch %s: %w", branch, err)
	}
	return nil
}

// cleanupFailedAdd runs with the repo lock held.
func (cs *Checkouts) cleanupFailedAdd(ctx context.Context, r *repocache.Repo, path, branch string, added bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := cs.removeLocked(cctx, r, path, branch, added); err != nil {
		cs.log.WarnContext(ctx, "cleanup after failed worktree add", "path", path, "err", err)
	}
}

// Sweep removes the checkout directories directly under dir that keep
// does not want, then tidies the repo cache (repocache.Cache.Tidy): the
// checkouts parked by another process go, git forgets the worktrees that
// are gone, and the local branches that no worktree has checked out are
// deleted. It cleans up after a worker that was killed mid-attempt, whose
// checkouts and branches nothing else removes. keep must want every
// checkout in use or being prepared; it is given the directory's path.
// The remote's branches are never touched.
func (cs *Checkouts) Sweep(ctx context.Context, dir string, keep func(path string) bool) (removed []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkout: sweep %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if keep(p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("checkout: sweep %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	if err := cs.cache.Tidy(ctx, cs.parked); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}
