package checkout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

// DefaultMaxDiffBytes bounds Changes.Diff unless Options says otherwise.
const DefaultMaxDiffBytes = 8 << 20

// cleanupTimeout bounds cleanup that must run even after the caller's
// context has ended (a failed Prepare must not leave a checkout behind).
const cleanupTimeout = 30 * time.Second

// Options configures Checkouts.
type Options struct {
	// MaxDiffBytes bounds Changes.Diff; longer diffs are cut and flagged.
	// Defaults to DefaultMaxDiffBytes.
	MaxDiffBytes int64

	// IdleCheckouts is how many released checkouts are kept for later
	// Prepares to reuse (see Release); 0 keeps none.
	IdleCheckouts int

	// Confine, if set, makes cmd run confined, reading nothing but the
	// system's programs and the given paths, writing nothing: the git
	// commands Drover runs in an agent's repository (agentgit.go) go
	// through it. The returned func is called once cmd has run.
	Confine func(cmd *exec.Cmd, read []string) (done func(), err error)

	// BatchMerges is the fewest results a Prepare must merge for it to try
	// merging them in one batch (batchmerge.go) before git merges the rest
	// one by one; negative never batches. Defaults to 3: the batch costs
	// three git processes, a merge on its own two.
	BatchMerges int

	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Checkouts prepares checkouts from a repo cache, parks released ones for
// reuse, and removes them. It is safe for concurrent use.
type Checkouts struct {
	cache     *repocache.Cache
	git       *git.Git
	log       *slog.Logger
	maxDiff   int64
	maxIdle   int
	confine   func(cmd *exec.Cmd, read []string) (func(), error)
	batchFrom int // Prepare tries batchMerges from this many results

	mu   sync.Mutex
	idle []*idleCheckout // parked checkouts, oldest first
}

// New makes the Checkouts of a cache; they run git as the cache does.
func New(cache *repocache.Cache, opts Options) *Checkouts {
	cs := &Checkouts{
		cache:     cache,
		git:       cache.Git(),
		log:       opts.Logger,
		maxDiff:   opts.MaxDiffBytes,
		maxIdle:   max(opts.IdleCheckouts, 0),
		confine:   opts.Confine,
		batchFrom: opts.BatchMerges,
	}
	if cs.log == nil {
		cs.log = slog.New(slog.DiscardHandler)
	}
	if cs.maxDiff <= 0 {
		cs.maxDiff = DefaultMaxDiffBytes
	}
	switch {
	case cs.batchFrom == 0:
		cs.batchFrom = minBatchMerges
	case cs.batchFrom < 0:
		cs.batchFrom = math.MaxInt
	}
	return cs
}

// PrepareOptions says what checkout to make.
type PrepareOptions struct {
	RepoURL string          // a git URL or absolute local path (bare or not)
	Base    string          // branch, tag, sha, or "HEAD" (= the remote's default branch); "" means "HEAD"
	Branch  string          // branch to create for the attempt, e.g. "drover/flow-1/task-a/1"
	Path    string          // absolute; must not exist yet, its parent must
	Merge   []repocache.Ref // results to merge, in order, after checkout
	// NoAgent leaves the checkout's .git as git made it, for a checkout
	// no agent runs in (an integration build); otherwise .git is a
	// repository of the agent's own (agentgit.go).
	NoAgent bool
}

// Checkout is one prepared attempt checkout. Its methods are not meant to
// be called concurrently with each other.
type Checkout struct {
	Path       string
	Branch     string
	BaseCommit string // resolved sha of Base
	Baseline   string // HEAD after merges, before the agent ran: what Observe compares against

	cs         *Checkouts
	repo       *repocache.Repo
	gitDir     string       // the checkout's private git dir inside the cache
	baseline   *snapshot    // files at Baseline time, including untracked ones
	last       *snapshot    // files at the last Observe, for the checkout's next user
	reused     *snapshot    // files when the checkout's last user observed it
	staged     *stagedIndex // the tree as the last Observe staged it, for Checkpoint
	checkpoint string       // the commit the last Checkpoint left the branch at
	removed    atomic.Bool
	agentGit   bool   // .git is the agent's repository (agentgit.go)
	agentHead  string // where the agent's branch was when Drover last made or read it
}

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

// checkOut makes the checkout of a resolved repository at path, on branch
// at its base: a parked checkout if there is one, else a fresh `git
// worktree add`. It unlocks the repository.
func (cs *Checkouts) checkOut(ctx context.Context, res *repocache.Resolved, branch, path string) (*Checkout, error) {
	r := res.Repo
	defer r.Unlock()
	if iw := cs.takeIdle(r); iw != nil {
		w, err := cs.reuse(ctx, r, iw, branch, path, res.Base)
		if err == nil {
			return w, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		cs.log.WarnContext(ctx, "reusing a checkout failed; adding a fresh one", "path", path, "err", err)
	}
	if _, err := cs.git.Run(ctx, cs.inCache("--git-dir="+r.Dir(), "worktree", "add", "--quiet",
		"-b", branch, path, res.Base)); err != nil {
		// git deletes its partial directory itself; the path may even be
		// someone else's that appeared since checkPath, so never delete it.
		cs.cleanupFailedAdd(ctx, r, path, branch, false)
		return nil, fmt.Errorf("checkout: add %s: %w", path, err)
	}
	w := &Checkout{Path: path, Branch: branch, BaseCommit: res.Base, cs: cs, repo: r}
	gitDir, err := cs.worktreeGitDir(ctx, r, path)
	if err != nil {
		cs.cleanupFailedAdd(ctx, r, path, branch, true)
		return nil, fmt.Errorf("checkout: locate git dir of %s: %w", path, err)
	}
	w.gitDir = gitDir
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
	snap, err := takeSnapshot(ctx, w.Path, w.gitDir, w.reused)
	if err != nil {
		return err
	}
	w.Baseline = head
	w.baseline, w.reused = snap, nil
	return nil
}

// inCache is a git command run in the cache directory.
func (cs *Checkouts) inCache(args ...string) git.Cmd { return git.Cmd{Dir: cs.cache.Dir(), Args: args} }

// worktreeGitDir returns the private git dir of a worktree `git worktree
// add` just made, from the .git file it wrote. Anything unexpected there is
// left to git to interpret.
func (cs *Checkouts) worktreeGitDir(ctx context.Context, r *repocache.Repo, path string) (string, error) {
	if dir, ok := readGitFile(filepath.Join(path, ".git"), r.Dir()); ok {
		return dir, nil
	}
	return cs.git.Output(ctx, git.Cmd{Dir: path, Args: []string{"rev-parse", "--absolute-git-dir"}})
}

// readGitFile parses a worktree's .git file ("gitdir: <path>\n"). It
// accepts only an absolute path to a directory inside commonDir (where git
// keeps worktrees' git dirs), resolved like `git rev-parse
// --absolute-git-dir` resolves it.
func readGitFile(gitFile, commonDir string) (string, bool) {
	b, err := os.ReadFile(gitFile)
	if err != nil {
		return "", false
	}
	p, ok := strings.CutPrefix(string(b), "gitdir: ")
	if !ok {
		return "", false
	}
	p = strings.TrimSuffix(p, "\n")
	if !filepath.IsAbs(p) || strings.ContainsAny(p, "\r\n") {
		return "", false
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil || !within(commonDir, p) {
		return "", false
	}
	if info, err := os.Stat(p); err != nil || !info.IsDir() {
		return "", false
	}
	return p, true
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

// cmd is a git command run on the checkout. GIT_DIR and GIT_WORK_TREE are
// explicit so that an agent deleting or rewriting the .git file cannot make
// git discover some other repository.
func (w *Checkout) cmd(args ...string) git.Cmd {
	return git.Cmd{Dir: w.Path, GitDir: w.gitDir, WorkTree: w.Path, Args: args}
}

// withStdin is c with in as its input.
func withStdin(c git.Cmd, in string) git.Cmd {
	c.Stdin = strings.NewReader(in)
	return c
}

// run runs a git command on the checkout.
func (w *Checkout) run(ctx context.Context, c git.Cmd) (git.Result, error) {
	return w.cs.git.Run(ctx, c)
}

func (w *Checkout) out(ctx context.Context, args ...string) (string, error) {
	return w.cs.git.Output(ctx, w.cmd(args...))
}

// GitDir is the checkout's private git dir, located before anyone else
// could touch the checkout.
func (w *Checkout) GitDir() string { return w.gitDir }

// CommonDir is the cached bare repository the checkout belongs to.
func (w *Checkout) CommonDir() string { return w.repo.Dir() }

func (w *Checkout) usable() error {
	if w == nil || w.cs == nil || w.gitDir == "" {
		return ErrNotPrepared
	}
	if w.removed.Load() {
		return fmt.Errorf("%w: %s", ErrRemoved, w.Path)
	}
	return nil
}
