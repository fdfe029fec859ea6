package checkout

import (
	"context"
	"fmt"
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
	gitDir     string          // the checkout's private git dir inside the cache
	baseline   *snapshot       // files at Baseline time, including untracked ones
	last       *snapshot       // files at the last Observe, for the checkout's next user
	reused     *snapshot       // files when the checkout's last user observed it
	parked     *parkedBaseline // the baseline its last user started from, if reused
	staged     *stagedIndex    // the tree as the last Observe staged it, for Checkpoint
	checkpoint string          // the commit the last Checkpoint left the branch at
	removed    atomic.Bool
	agentGit   bool   // .git is the agent's repository (agentgit.go)
	agentHead  string // where the agent's branch was when Drover last made or read it

	// A push to a local repository hides its result branches but these
	// (pushrefs.go), when hideResults.
	shownResults []string
	hideResults  bool
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
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), "--git-dir="+r.Dir(), "worktree", "add", "--quiet",
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
