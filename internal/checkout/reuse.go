package checkout

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
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

// idleCheckout is a parked checkout, at its path inside its repository's
// ParkDir, its HEAD detached.
type idleCheckout struct {
	repo  *repocache.Repo
	gen   uint64 // the repository's Generation when parked
	path  string
	files *snapshot       // from the last Observe, if any: most hashes still hold
	base  *parkedBaseline // the baseline of its last attempt, if it observed
}

// A parked checkout also keeps the baseline its last attempt started from.
// A Prepare of the same commit on it takes that as its own baseline rather
// than walking the tree again (an lstat of every file, the worker's largest
// cost per attempt after git's): `checkout --force` of the commit and
// `clean -ffdx` leave the worktree holding the commit's files and nothing
// else, which is what that baseline recorded. Its lstat data only saves
// hashing: the next Observe hashes every file whose lstat differs from it
// (those the checkout rewrote), and compares the content. Anything
// written after the checkout is then the attempt's change, as the commit
// that takes it in says it is.
type parkedBaseline struct {
	commit string // the checkout's Baseline
	files  *snapshot
}

// parkedBaselineOf is what a checkout leaves for its next user: its
// baseline with the lstat its last Observe took of each file it still
// held as then. Without that, a checkout reused a thousand times would
// carry the lstat of its first walk, and each Observe would hash every
// file any attempt had rewritten since. The files the attempt changed keep
// no lstat, so they are hashed again. It takes w's baseline: the attempt
// is over.
func parkedBaselineOf(w *Checkout) *parkedBaseline {
	base, last := w.baseline, w.last
	if base == nil || last == nil || w.Baseline == "" {
		return nil
	}
	for p, b := range base.files {
		if c, ok := last.files[p]; ok && c.mode == b.mode && c.hash == b.hash {
			b.stat = c.stat
		} else {
			b.stat = statKey{}
		}
		base.files[p] = b
	}
	// Each lstat kept is last's, which last's stamp vouches for; a file
	// changed as last's walk began is not trusted (unchangedSince).
	base.stamp = last.stamp
	w.baseline = nil
	return &parkedBaseline{commit: w.Baseline, files: base}
}

// at returns the parked baseline if it is of commit, and the checkout was
// checked out there and merged nothing (its head is its base), or nil.
func (pb *parkedBaseline) at(head, base string) *snapshot {
	if pb == nil || head != base || pb.commit != head {
		return nil
	}
	return pb.files
}

// gone reports whether the repository was quarantined since iw was
// parked: the checkout went with it.
func (iw *idleCheckout) gone() bool { return iw.repo.Generation() != iw.gen }

// privateGitFiles are the entries of a worktree's private git dir that a
// plain checkout, commit and merge leave; any other makes it unfit to park.
var privateGitFiles = map[string]bool{
	"HEAD": true, "ORIG_HEAD": true, "COMMIT_EDITMSG": true, "index": true,
	"commondir": true, "gitdir": true, "logs": true, stampFile: true,
}

// Release is Remove for a checkout whose attempt is over, except that the
// checkout may be kept (Options.IdleCheckouts) for a later Prepare of the
// same repository to start from. The checkout's path is free again either
// way, and so is its local branch: a parked checkout's HEAD is detached,
// so the attempt can be prepared again at a later epoch. Release only
// what has been observed and checkpointed: what is parked is taken as the
// attempt's result, which it no longer needs.
func (cs *Checkouts) Release(ctx context.Context, w *Checkout) error {
	if w != nil {
		w.dropStaged() // an Observe without its Checkpoint
	}
	if cs.maxIdle == 0 || w == nil || w.cs != cs || w.repo == nil || !cs.parkable(ctx, w) {
		return cs.Remove(ctx, w)
	}
	r := w.repo
	if err := r.Lock(ctx); err != nil {
		return err
	}
	if w.removed.Load() {
		r.Unlock()
		return nil
	}
	dst, err := cs.park(ctx, r, w)
	if err != nil {
		cs.log.DebugContext(ctx, "park worktree failed; removing it", "path", w.Path, "err", err)
		err = cs.removeLocked(ctx, r, w.Path, w.Branch, true)
		if err == nil {
			w.removed.Store(true)
			r.Check(ctx)
		}
		r.Unlock()
		return err
	}
	w.removed.Store(true)
	// Listed before the lock goes, so a sweep never takes it for a dead
	// process's. Beyond the limit, the checkout parked longest ago goes.
	cs.mu.Lock()
	cs.idle = append(cs.dropGone(), &idleCheckout{repo: r, gen: r.Generation(), path: dst, files: w.last, base: parkedBaselineOf(w)})
	var evict *idleCheckout
	if len(cs.idle) > cs.maxIdle {
		evict, cs.idle = cs.idle[0], cs.idle[1:]
	}
	cs.mu.Unlock()
	r.Check(ctx) // a changed cache goes with what was just parked in it
	r.Unlock()
	if evict != nil {
		return cs.removeIdle(ctx, evict)
	}
	return nil
}

// dropGone forgets the parked checkouts whose repository was quarantined
// and returns the others. Caller holds cs.mu.
func (cs *Checkouts) dropGone() []*idleCheckout {
	cs.idle = slices.DeleteFunc(cs.idle, (*idleCheckout).gone)
	return cs.idle
}

// parkable reports whether w's checkout may serve another attempt (see
// above). It reads w's private git dir and asks git for the index flags.
func (cs *Checkouts) parkable(ctx context.Context, w *Checkout) bool {
	if w.usable() != nil {
		return false
	}
	entries, err := os.ReadDir(w.gitDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !privateGitFiles[e.Name()] {
			cs.log.DebugContext(ctx, "worktree not reused", "path", w.Path, "why", "git dir has "+e.Name())
			return false
		}
	}
	if p, ok := attributesChanged(w.baseline, w.last); ok {
		cs.log.DebugContext(ctx, "worktree not reused", "path", w.Path, "why", "changed "+p)
		return false
	}
	// -v tags each entry: "H" cached; lower case assume-unchanged, "S"
	// skip-worktree, and others that a plain checkout never has.
	res, err := w.run(ctx, w.cmd("ls-files", "-v", "-z"))
	if err != nil {
		return false
	}
	for rec := range bytes.SplitSeq(res.Stdout, []byte{0}) {
		if len(rec) > 0 && !bytes.HasPrefix(rec, []byte("H ")) {
			cs.log.DebugContext(ctx, "worktree not reused", "path", w.Path, "why", "index entry "+string(rec))
			return false
		}
	}
	return true
}

// attributesChanged returns a .gitattributes the attempt created, changed
// or deleted, as its last Observe saw it. Attributes convert what git
// reads and writes (eol, text, ident, working-tree-encoding): under
// `*.txt eol=crlf` an attempt's a.txt with CRLF line ends is staged as the
// commit's LF one, so the index holds the commit's blob with the stat of
// the CRLF file. A checkout of the commit then restores .gitattributes but
// trusts that stat and leaves a.txt as the attempt wrote it, and the next
// attempt, maybe another flow's, would start from it and commit it.
func attributesChanged(baseline, last *snapshot) (string, bool) {
	if baseline == nil || last == nil {
		return "", false
	}
	isAttributes := func(p string) bool { return p == ".gitattributes" || strings.HasSuffix(p, "/.gitattributes") }
	for p, f := range last.files {
		if b, ok := baseline.files[p]; isAttributes(p) && (!ok || b.hash != f.hash || b.mode != f.mode) {
			return p, true // created or changed
		}
	}
	for p := range baseline.files {
		if _, ok := last.files[p]; isAttributes(p) && !ok {
			return p, true // deleted
		}
	}
	return "", false
}

// park detaches w's HEAD at its branch, deletes the branch and moves the
// checkout into r's ParkDir. Caller holds r's lock.
func (cs *Checkouts) park(ctx context.Context, r *repocache.Repo, w *Checkout) (string, error) {
	if err := w.restoreGitFile(); err != nil {
		return "", err
	}
	ref := "refs/heads/" + w.Branch
	if _, err := w.run(ctx, w.cmd("update-ref", "--no-deref", "HEAD", ref)); err != nil {
		return "", err
	}
	gd := "--git-dir=" + r.Dir()
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), gd, "update-ref", "-d", ref)); err != nil {
		return "", err
	}
	dir := r.ParkDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	dst := filepath.Join(dir, hex.EncodeToString(b[:]))
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), gd, "worktree", "move", w.Path, dst)); err != nil {
		return "", err
	}
	return dst, nil
}

// takeIdle hands out a checkout parked for r, if there is one.
func (cs *Checkouts) takeIdle(r *repocache.Repo) *idleCheckout {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	idle := cs.dropGone()
	for i := len(idle) - 1; i >= 0; i-- {
		if iw := idle[i]; iw.repo == r {
			cs.idle = append(idle[:i], idle[i+1:]...)
			return iw
		}
	}
	return nil
}

// reuse turns a parked checkout into the checkout a Prepare asks for:
// moved to path, on a new branch at base, with nothing left of its last
// attempt. On failure the checkout is removed and the caller adds a fresh
// one. Caller holds r's lock.
func (cs *Checkouts) reuse(ctx context.Context, r *repocache.Repo, iw *idleCheckout, branch, path, base string) (*Checkout, error) {
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), "--git-dir="+r.Dir(), "worktree", "move", iw.path, path)); err != nil {
		cs.removeIdleLocked(ctx, iw)
		return nil, err
	}
	w := &Checkout{Path: path, Branch: branch, BaseCommit: base, cs: cs, repo: r, reused: iw.files, parked: iw.base}
	fail := func(err error) (*Checkout, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rmErr := cs.removeLocked(cctx, r, path, branch, true); rmErr != nil {
			cs.log.WarnContext(ctx, "cleanup after failed reuse", "path", path, "err", rmErr)
		}
		return nil, err
	}
	gitDir, ok := readGitFile(filepath.Join(path, ".git"), r.Dir())
	if !ok {
		return fail(errors.New("checkout: reused checkout has no usable .git file"))
	}
	w.gitDir = gitDir
	if _, err := w.run(ctx, w.cmd("checkout", "--force", "--quiet", "--no-recurse-submodules", "-B", branch, base)); err != nil {
		return fail(err)
	}
	if _, err := w.run(ctx, w.cmd("clean", "-ffdxq")); err != nil {
		return fail(err)
	}
	return w, nil
}

// removeIdle removes a parked checkout.
func (cs *Checkouts) removeIdle(ctx context.Context, iw *idleCheckout) error {
	if err := iw.repo.Lock(ctx); err != nil {
		return err
	}
	defer iw.repo.Unlock()
	if iw.gone() {
		return nil // quarantined with its repository
	}
	return cs.removeIdleLocked(ctx, iw)
}

func (cs *Checkouts) removeIdleLocked(ctx context.Context, iw *idleCheckout) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := cs.removeLocked(cctx, iw.repo, iw.path, "", true); err != nil {
		cs.log.WarnContext(ctx, "remove idle worktree", "path", iw.path, "err", err)
		return err
	}
	return nil
}

// Idle is how many checkouts are parked.
func (cs *Checkouts) Idle() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.dropGone())
}

// DropIdle removes every parked checkout, to give its disk space back.
func (cs *Checkouts) DropIdle(ctx context.Context) error {
	cs.mu.Lock()
	idle := cs.dropGone()
	cs.idle = nil
	cs.mu.Unlock()
	var errs []error
	for _, iw := range idle {
		if err := cs.removeIdle(ctx, iw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parked reports whether path is a checkout this process parked: the
// cache's sweep (Sweep) removes any other it finds parked.
func (cs *Checkouts) parked(path string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, iw := range cs.idle {
		if iw.path == path {
			return true
		}
	}
	return false
}
