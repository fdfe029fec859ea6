package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sweep removes the worktree directories directly under dir that keep does
// not want, then tidies every cached repository: git forgets the worktrees
// that are gone (`git worktree prune`) and the local branches that no
// worktree has checked out are deleted. It cleans up after a worker that was
// killed mid-attempt, whose worktrees and branches nothing else removes.
// keep must want every worktree in use or being prepared; it is given the
// directory's path. The remote's branches are never touched.
func (c *Cache) Sweep(ctx context.Context, dir string, keep func(path string) bool) (removed []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("worktree: sweep %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if keep(p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("worktree: sweep %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	repos, err := os.ReadDir(c.dir)
	if err != nil {
		return removed, errors.Join(append(errs, fmt.Errorf("worktree: sweep cache: %w", err))...)
	}
	for _, e := range repos {
		if !e.IsDir() || strings.HasPrefix(e.Name(), cloneTempPrefix) || e.Name() == quarantineDir {
			continue
		}
		if err := c.tidy(ctx, c.repoAt(filepath.Join(c.dir, e.Name()))); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// repoAt returns the shared state of the cached repository in dir, whose
// URL may not be known to this process yet.
func (c *Cache) repoAt(dir string) *repo {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.repos[dir]
	if !ok {
		r = &repo{dir: dir, sem: make(chan struct{}, 1)}
		c.repos[dir] = r
	}
	return r
}

// tidy prunes the records of vanished worktrees of one cached repository,
// deletes its local branches that no worktree has checked out, and forgets
// the result branches it fetched (refs/remotes/origin/drover/*). A worker
// fetches the results a task merges, and a new cache fetches every branch
// of the remote: kept, they would pile up one per attempt of the flows the
// worker ever served, and every fetch checks connectivity against all of
// the cache's refs. The next Prepare fetches again what it needs.
func (c *Cache) tidy(ctx context.Context, r *repo) error {
	if err := r.lock(ctx); err != nil {
		return err
	}
	defer r.unlock()
	if err := c.checkCache(ctx, r); err != nil {
		return err
	}
	if err := c.sweepIdle(r); err != nil {
		return err
	}
	gd := "--git-dir=" + r.dir
	if _, err := c.run(ctx, gitRun{args: []string{gd, "worktree", "prune"}}); err != nil {
		return fmt.Errorf("worktree: prune %s: %w", r.dir, err)
	}
	list, err := c.out(ctx, gitRun{args: []string{gd, "worktree", "list", "--porcelain"}})
	if err != nil {
		return fmt.Errorf("worktree: list worktrees of %s: %w", r.dir, err)
	}
	inUse := map[string]bool{}
	for line := range strings.Lines(list) {
		if ref, ok := strings.CutPrefix(strings.TrimSpace(line), "branch "); ok {
			inUse[ref] = true
		}
	}
	refs, err := c.out(ctx, gitRun{args: []string{gd, "for-each-ref", "--format=%(refname)", "refs/heads/", resultsFetched}})
	if err != nil {
		return fmt.Errorf("worktree: list branches of %s: %w", r.dir, err)
	}
	var del strings.Builder
	results := false
	for ref := range strings.Lines(refs) {
		ref = strings.TrimSpace(ref)
		if ref == "" || inUse[ref] {
			continue
		}
		results = results || strings.HasPrefix(ref, resultsFetched)
		fmt.Fprintf(&del, "delete %s\n", ref)
	}
	if del.Len() == 0 {
		return nil
	}
	if _, err := c.run(ctx, gitRun{args: []string{gd, "update-ref", "--stdin"}, stdin: del.String()}); err != nil {
		return fmt.Errorf("worktree: delete branches of %s: %w", r.dir, err)
	}
	if results {
		r.fetchedAt, r.fetched = time.Time{}, refspecs{} // what it fetched is gone
	}
	return nil
}

// resultsFetched is where a cache keeps the attempts' result branches it
// fetched (drovertype.AttemptBranch names them drover/<flow>/...).
const resultsFetched = "refs/remotes/origin/drover/"
