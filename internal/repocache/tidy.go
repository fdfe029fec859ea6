package repocache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// Tidy tidies every cached repository: it checks it (check.go), removes
// the checkouts in its ParkDir that parked does not want, lets git forget
// the worktrees that are gone (`git worktree prune`), and deletes the
// local branches that no worktree has checked out and the result branches
// it fetched. It cleans up after a worker that was killed mid-attempt,
// whose worktrees and branches nothing else removes. parked is given the
// path of each entry of a ParkDir. The remote's branches are never
// touched.
func (c *Cache) Tidy(ctx context.Context, parked func(path string) bool) error {
	repos, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("repocache: sweep cache: %w", err)
	}
	var errs []error
	for _, e := range repos {
		if !e.IsDir() || strings.HasPrefix(e.Name(), cloneTempPrefix) || e.Name() == quarantineDir {
			continue
		}
		if err := c.tidy(ctx, c.repoAt(filepath.Join(c.dir, e.Name())), parked); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tidy prunes the records of vanished worktrees of one cached repository,
// deletes its local branches that no worktree has checked out, and forgets
// the result branches it fetched (refs/remotes/origin/drover/*). A worker
// fetches the results a task merges, and a new cache fetches every branch
// of the remote: kept, they would pile up one per attempt of the flows the
// worker ever served, and every fetch checks connectivity against all of
// the cache's refs. The next Resolve fetches again what it needs.
func (c *Cache) tidy(ctx context.Context, r *Repo, parked func(string) bool) error {
	if err := r.Lock(ctx); err != nil {
		return err
	}
	defer r.Unlock()
	if err := c.checkCache(ctx, r); err != nil {
		return err
	}
	if err := sweepParked(r, parked); err != nil {
		return err
	}
	gd := "--git-dir=" + r.dir
	if _, err := c.git.Run(ctx, git.In(c.dir, gd, "worktree", "prune")); err != nil {
		return fmt.Errorf("repocache: prune %s: %w", r.dir, err)
	}
	list, err := c.git.Output(ctx, git.In(c.dir, gd, "worktree", "list", "--porcelain"))
	if err != nil {
		return fmt.Errorf("repocache: list worktrees of %s: %w", r.dir, err)
	}
	inUse := map[string]bool{}
	for line := range strings.Lines(list) {
		if ref, ok := strings.CutPrefix(strings.TrimSpace(line), "branch "); ok {
			inUse[ref] = true
		}
	}
	refs, err := c.git.Output(ctx, git.In(c.dir, gd, "for-each-ref", "--format=%(refname)", "refs/heads/", resultsFetched))
	if err != nil {
		return fmt.Errorf("repocache: list branches of %s: %w", r.dir, err)
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
	cmd := git.In(c.dir, gd, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(del.String())
	if _, err := c.git.Run(ctx, cmd); err != nil {
		return fmt.Errorf("repocache: delete branches of %s: %w", r.dir, err)
	}
	if results {
		r.fetchedAt, r.fetched = time.Time{}, refspecs{} // what it fetched is gone
	}
	return nil
}

// resultsFetched is where a cache keeps the attempts' result branches it
// fetched (drovertype.AttemptBranch names them drover/<flow>/...).
const resultsFetched = "refs/remotes/origin/drover/"

// sweepParked deletes the entries of r's ParkDir that parked does not
// want: a previous process's. Caller holds r's lock; `git worktree prune`
// afterwards forgets them.
func sweepParked(r *Repo, parked func(string) bool) error {
	dir := r.ParkDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("repocache: sweep %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if parked(p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("repocache: sweep %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
