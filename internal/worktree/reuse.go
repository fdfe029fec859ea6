package worktree

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Reusing checkouts. A fresh `git worktree add` writes every file of the
// repository and leaves an index that git must distrust for a second (its
// files are as new as the index, "racily clean"), so the attempt's first
// `git add` and `git commit` hash every file again; `git worktree remove`
// then deletes them all. For a repository of 2,000 files that was 120 ms of
// every attempt. A released checkout is instead parked inside its cached
// repository, and the next Prepare of that repository moves it into place
// and checks out its base there, which rewrites only the files that differ
// and leaves the rest, and their index entries, trusted.
//
// A checkout is parked only when nothing of its last user can reach the
// next one through it: the worktree's private git dir holds nothing but
// what git writes for a plain checkout (no merge or rebase in progress, no
// per-worktree config or info), and no index entry is marked
// assume-unchanged or skip-worktree (which would hide the file from the
// next attempt's checkout and commit). Everything else the last user left
// is undone on reuse: `checkout --force` of the base and `clean -ffdx`
// (untracked and ignored files, nested repositories). Changes to the
// shared git internals (config, hooks) fail the attempt that made them
// (scope.Guard) and such a worktree is never released.

// idleDir is where a cached repository keeps its parked checkouts.
const idleDir = "drover-idle"

// idleWorktree is a parked checkout, at its path inside idleDir, its HEAD
// detached.
type idleWorktree struct {
	repo  *repo
	path  string
	files *snapshot // from the last Observe, if any: most hashes still hold
}

// privateGitFiles are the entries of a worktree's private git dir that a
// plain checkout, commit and merge leave; any other makes it unfit to park.
var privateGitFiles = map[string]bool{
	"HEAD": true, "ORIG_HEAD": true, "COMMIT_EDITMSG": true, "index": true,
	"commondir": true, "gitdir": true, "logs": true, stampFile: true,
}

// Release is Remove for a worktree whose attempt is over, except that the
// checkout may be kept (CacheOptions.IdleWorktrees) for a later Prepare of
// the same repository to start from. The worktree's path is free again
// either way, and so is its local branch: a parked checkout's HEAD is
// detached, so the attempt can be prepared again at a later epoch.
// Release only what has been observed and checkpointed: what is parked is
// taken as the attempt's result, which it no longer needs.
func (c *Cache) Release(ctx context.Context, w *Worktree) error {
	if w != nil {
		w.dropStaged() // an Observe without its Checkpoint
	}
	if c.maxIdle == 0 || w == nil || w.cache != c || w.repo == nil || !c.parkable(ctx, w) {
		return c.Remove(ctx, w)
	}
	r := w.repo
	if err := r.lock(ctx); err != nil {
		return err
	}
	if w.removed.Load() {
		r.unlock()
		return nil
	}
	dst, err := c.park(ctx, r, w)
	if err != nil {
		c.log.DebugContext(ctx, "park worktree failed; removing it", "path", w.Path, "err", err)
		err = c.removeLocked(ctx, r, w.Path, w.Branch, true)
		if err == nil {
			w.removed.Store(true)
			c.checkAfter(ctx, r)
		}
		r.unlock()
		return err
	}
	w.removed.Store(true)
	// Listed before the lock goes, so a sweep never takes it for a dead
	// process's. Beyond the limit, the checkout parked longest ago goes.
	c.mu.Lock()
	c.idle = append(c.idle, &idleWorktree{repo: r, path: dst, files: w.last})
	var evict *idleWorktree
	if len(c.idle) > c.maxIdle {
		evict, c.idle = c.idle[0], c.idle[1:]
	}
	c.mu.Unlock()
	c.checkAfter(ctx, r) // a changed cache goes with what was just parked in it
	r.unlock()
	if evict != nil {
		return c.removeIdle(ctx, evict)
	}
	return nil
}

// parkable reports whether w's checkout may serve another attempt (see
// above). It reads w's private git dir and asks git for the index flags.
func (c *Cache) parkable(ctx context.Context, w *Worktree) bool {
	if w.usable() != nil {
		return false
	}
	entries, err := os.ReadDir(w.gitDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !privateGitFiles[e.Name()] {
			c.log.DebugContext(ctx, "worktree not reused", "path", w.Path, "why", "git dir has "+e.Name())
			return false
		}
	}
	// -v tags each entry: "H" cached; lower case assume-unchanged, "S"
	// skip-worktree, and others that a plain checkout never has.
	res, err := w.run(ctx, gitRun{args: []string{"ls-files", "-v", "-z"}})
	if err != nil {
		return false
	}
	for rec := range bytes.SplitSeq(res.stdout, []byte{0}) {
		if len(rec) > 0 && !bytes.HasPrefix(rec, []byte("H ")) {
			c.log.DebugContext(ctx, "worktree not reused", "path", w.Path, "why", "index entry "+string(rec))
			return false
		}
	}
	return true
}

// park detaches w's HEAD at its branch, deletes the branch and moves the
// checkout into r's idle dir. Caller holds r's lock.
func (c *Cache) park(ctx context.Context, r *repo, w *Worktree) (string, error) {
	if err := w.restoreGitFile(); err != nil {
		return "", err
	}
	ref := "refs/heads/" + w.Branch
	if _, err := w.run(ctx, gitRun{args: []string{"update-ref", "--no-deref", "HEAD", ref}}); err != nil {
		return "", err
	}
	if _, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "update-ref", "-d", ref}}); err != nil {
		return "", err
	}
	dir := filepath.Join(r.dir, idleDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	dst := filepath.Join(dir, hex.EncodeToString(b[:]))
	if _, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "worktree", "move", w.Path, dst}}); err != nil {
		return "", err
	}
	return dst, nil
}

// takeIdle hands out a checkout parked for r, if there is one.
func (c *Cache) takeIdle(r *repo) *idleWorktree {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.idle) - 1; i >= 0; i-- {
		if iw := c.idle[i]; iw.repo == r {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			return iw
		}
	}
	return nil
}

// reuse turns a parked checkout into the worktree opts asks for: moved to
// wtPath, on a new branch at base, with nothing left of its last attempt.
// On failure the checkout is removed and the caller adds a fresh one.
// Caller holds r's lock.
func (c *Cache) reuse(ctx context.Context, r *repo, iw *idleWorktree, branch, wtPath, base string) (*Worktree, error) {
	gd := "--git-dir=" + r.dir
	if _, err := c.run(ctx, gitRun{args: []string{gd, "worktree", "move", iw.path, wtPath}}); err != nil {
		c.removeIdleLocked(ctx, iw)
		return nil, err
	}
	w := &Worktree{Path: wtPath, Branch: branch, BaseCommit: base, cache: c, repo: r, reused: iw.files}
	fail := func(err error) (*Worktree, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rmErr := c.removeLocked(cctx, r, wtPath, branch, true); rmErr != nil {
			c.log.WarnContext(ctx, "cleanup after failed reuse", "path", wtPath, "err", rmErr)
		}
		return nil, err
	}
	gitDir, ok := readGitFile(filepath.Join(wtPath, ".git"), r.dir)
	if !ok {
		return fail(errors.New("worktree: reused checkout has no usable .git file"))
	}
	w.gitDir = gitDir
	if _, err := w.run(ctx, gitRun{args: []string{"checkout", "--force", "--quiet", "--no-recurse-submodules", "-B", branch, base}}); err != nil {
		return fail(err)
	}
	if _, err := w.run(ctx, gitRun{args: []string{"clean", "-ffdxq"}}); err != nil {
		return fail(err)
	}
	return w, nil
}

// removeIdle removes a parked checkout and its branch.
func (c *Cache) removeIdle(ctx context.Context, iw *idleWorktree) error {
	if err := iw.repo.lock(ctx); err != nil {
		return err
	}
	defer iw.repo.unlock()
	return c.removeIdleLocked(ctx, iw)
}

func (c *Cache) removeIdleLocked(ctx context.Context, iw *idleWorktree) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.removeLocked(cctx, iw.repo, iw.path, "", true); err != nil {
		c.log.WarnContext(ctx, "remove idle worktree", "path", iw.path, "err", err)
		return err
	}
	return nil
}

// Idle is how many checkouts are parked.
func (c *Cache) Idle() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.idle)
}

// DropIdle removes every parked checkout, to give its disk space back.
func (c *Cache) DropIdle(ctx context.Context) error {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	var errs []error
	for _, iw := range idle {
		if err := c.removeIdle(ctx, iw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepIdle deletes the checkouts in r's idle dir that this cache has not
// parked: a previous process's. Caller holds r's lock; `git worktree
// prune` afterwards forgets them.
func (c *Cache) sweepIdle(r *repo) error {
	dir := filepath.Join(r.dir, idleDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("worktree: sweep %s: %w", dir, err)
	}
	c.mu.Lock()
	parked := map[string]bool{}
	for _, iw := range c.idle {
		parked[iw.path] = true
	}
	c.mu.Unlock()
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if parked[p] {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("worktree: sweep %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
