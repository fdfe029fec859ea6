package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// cleanupTimeout bounds cleanup that must run even after the caller's
// context has ended (a failed Prepare must not leave a worktree behind).
const cleanupTimeout = 30 * time.Second

// PrepareOptions says what worktree to create.
type PrepareOptions struct {
	RepoURL string // a git URL or absolute local path (bare or not)
	Base    string // branch, tag, sha, or "HEAD" (= the remote's default branch); "" means "HEAD"
	Branch  string // branch to create for the attempt, e.g. "drover/flow-1/task-a/1"
	Path    string // absolute; must not exist yet, its parent must
	Merge   []Ref  // results to merge, in order, after checkout
	// NoAgent leaves the checkout's .git as git made it, for a worktree
	// no agent runs in (an integration build); otherwise .git is a
	// repository of the agent's own (agentgit.go).
	NoAgent bool
}

// Ref is a result branch on the remote, expected to be at Commit.
// An empty Commit accepts whatever the branch points at.
type Ref struct{ Branch, Commit string }

// Worktree is one prepared attempt checkout. Its methods are not meant to
// be called concurrently with each other.
type Worktree struct {
	Path       string
	Branch     string
	BaseCommit string // resolved sha of Base
	Baseline   string // HEAD after merges, before the agent ran: what Observe compares against

	cache      *Cache
	repo       *repo
	gitDir     string       // the worktree's private git dir inside the cache
	baseline   *snapshot    // files at Baseline time, including untracked ones
	last       *snapshot    // files at the last Observe, for the checkout's next user
	reused     *snapshot    // files when the checkout's last user observed it
	staged     *stagedIndex // the tree as the last Observe staged it, for Checkpoint
	checkpoint string       // the commit the last Checkpoint left the branch at
	removed    atomic.Bool
	agentGit   bool   // .git is the agent's repository (agentgit.go)
	agentHead  string // where the agent's branch was when Drover last made or read it
}

// Prepare syncs the cache, creates a worktree on a new branch at Base,
// merges opts.Merge in order and records the baseline for Observe.
// On any error nothing is left behind: no directory, no branch.
func (c *Cache) Prepare(ctx context.Context, opts PrepareOptions) (*Worktree, error) {
	r, err := c.repoFor(opts.RepoURL)
	if err != nil {
		return nil, err
	}
	if err := c.checkBranch(ctx, opts.Branch); err != nil {
		return nil, err
	}
	for _, m := range opts.Merge {
		if err := c.checkBranch(ctx, m.Branch); err != nil {
			return nil, fmt.Errorf("worktree: merge ref: %w", err)
		}
		if m.Commit != "" && !isHex(m.Commit) {
			return nil, fmt.Errorf("%w: merge commit %q for %s", ErrInvalidRevision, m.Commit, m.Branch)
		}
	}
	wtPath, err := c.checkPath(opts.Path)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // checkBranch may not have run git to notice
	}

	w, mergeSHAs, err := c.addWorktree(ctx, r, opts, wtPath)
	if err != nil {
		return nil, err
	}
	// From here the worktree exists; undo it on failure.
	fail := func(err error) (*Worktree, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cErr := c.Remove(cctx, w); cErr != nil {
			c.log.WarnContext(ctx, "cleanup after failed prepare", "path", w.Path, "err", cErr)
		}
		return nil, err
	}
	// Merges touch only this worktree's branch and index, and add
	// objects, so they run without the repo lock.
	head, err := w.mergeAll(ctx, opts.Merge, mergeSHAs)
	if err != nil {
		return fail(err)
	}
	if !opts.NoAgent {
		w.agentGit = true
		if err := w.makeAgentGitDir(head); err != nil {
			return fail(err)
		}
	}
	snap, err := takeSnapshot(ctx, w.Path, w.gitDir, w.reused)
	if err != nil {
		return fail(err)
	}
	w.Baseline = head
	w.baseline, w.reused = snap, nil
	c.log.InfoContext(ctx, "worktree prepared", "url", r.url, "path", w.Path, "branch", w.Branch,
		"base", w.BaseCommit, "baseline", w.Baseline, "merged", len(opts.Merge))
	return w, nil
}

// addWorktree does the part of Prepare that touches shared repository
// state, under the repo lock: sync, resolve, `git worktree add`.
func (c *Cache) addWorktree(ctx context.Context, r *repo, opts PrepareOptions, wtPath string) (*Worktree, []string, error) {
	asked := time.Now() // before waiting: a fetch made meanwhile will do
	if err := r.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer r.unlock()
	if err := c.sync(ctx, r, asked, wantedRefspecs(opts.Base, opts.Merge)); err != nil {
		return nil, nil, err
	}
	baseSHA, sha, err := c.resolveBaseAndBranch(ctx, r, opts.Base, opts.Branch)
	if err != nil {
		return nil, nil, err
	}
	if sha != "" {
		return nil, nil, fmt.Errorf("%w: %s (at %s)", ErrBranchExists, opts.Branch, shortSHA(sha))
	}
	// A result at the base commit, or at one merged before it, changes
	// nothing and is neither resolved nor merged (its sha stays ""): a task
	// that commits nothing reports its base as its result, and a flow of
	// 10,000 such tasks would otherwise have its integration run 10,000
	// merges that do nothing, and twice as many rev-parses.
	mergeSHAs := make([]string, len(opts.Merge))
	done := map[string]bool{baseSHA: true}
	var listed map[string]string
	if len(opts.Merge) >= listRefsFrom {
		var err error
		if listed, err = c.remoteCommits(ctx, r); err != nil {
			return nil, nil, err
		}
	}
	for i, m := range opts.Merge {
		if done[m.Commit] {
			continue
		}
		sha, ok := listed[m.Branch]
		if !ok || (m.Commit != "" && m.Commit != sha) {
			var err error
			if sha, err = c.resolveMergeRef(ctx, r, m); err != nil {
				return nil, nil, err
			}
		}
		if !done[sha] {
			done[sha], mergeSHAs[i] = true, sha
		}
	}
	if iw := c.takeIdle(r); iw != nil {
		w, err := c.reuse(ctx, r, iw, opts.Branch, wtPath, baseSHA)
		if err == nil {
			return w, mergeSHAs, nil
		}
		if ctx.Err() != nil {
			return nil, nil, err
		}
		c.log.WarnContext(ctx, "reusing a checkout failed; adding a fresh one", "path", wtPath, "err", err)
	}
	if _, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "worktree", "add", "--quiet",
		"-b", opts.Branch, wtPath, baseSHA}}); err != nil {
		// git deletes its partial directory itself; the path may even be
		// someone else's that appeared since checkPath, so never delete it.
		c.cleanupFailedAdd(ctx, r, wtPath, opts.Branch, false)
		return nil, nil, fmt.Errorf("worktree: add %s: %w", wtPath, err)
	}
	w := &Worktree{Path: wtPath, Branch: opts.Branch, BaseCommit: baseSHA, cache: c, repo: r}
	gitDir, err := c.worktreeGitDir(ctx, r, wtPath)
	if err != nil {
		c.cleanupFailedAdd(ctx, r, wtPath, opts.Branch, true)
		return nil, nil, fmt.Errorf("worktree: locate git dir of %s: %w", wtPath, err)
	}
	w.gitDir = gitDir
	return w, mergeSHAs, nil
}

// worktreeGitDir returns the private git dir of a worktree `git worktree
// add` just made, from the .git file it wrote. Anything unexpected there is
// left to git to interpret.
func (c *Cache) worktreeGitDir(ctx context.Context, r *repo, wtPath string) (string, error) {
	if dir, ok := readGitFile(filepath.Join(wtPath, ".git"), r.dir); ok {
		return dir, nil
	}
	return c.out(ctx, gitRun{dir: wtPath, args: []string{"rev-parse", "--absolute-git-dir"}})
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

// listRefsFrom is how many results a Prepare must merge for their branches
// to be read in one `git for-each-ref` rather than two `git rev-parse`
// each: an integration build merges every result of its flow.
const listRefsFrom = 8

// remoteCommits maps the cache's remote branches that point at commits to
// their commits, in one git process. Caller holds r's lock.
func (c *Cache) remoteCommits(ctx context.Context, r *repo) (map[string]string, error) {
	res, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "for-each-ref",
		"--format=%(objectname) %(objecttype) %(refname)", "refs/remotes/origin/"}})
	if err != nil {
		return nil, fmt.Errorf("worktree: list result branches: %w", err)
	}
	refs := map[string]string{}
	for line := range strings.Lines(string(res.stdout)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(f) != 3 || f[1] != "commit" || !isObjectID(f[0]) {
			continue // a tag or anything odd: resolveMergeRef decides
		}
		if branch, ok := strings.CutPrefix(f[2], "refs/remotes/origin/"); ok {
			refs[branch] = f[0]
		}
	}
	return refs, nil
}

// resolveMergeRef finds a result branch under refs/remotes/origin and
// checks it is where the caller expects. Caller holds r's lock.
func (c *Cache) resolveMergeRef(ctx context.Context, r *repo, m Ref) (string, error) {
	sha, err := c.resolveCommit(ctx, r.dir, "refs/remotes/origin/"+m.Branch)
	if err != nil {
		return "", err
	}
	if sha == "" {
		return "", fmt.Errorf("worktree: merge ref: %w", &RevisionNotFoundError{RepoURL: r.url, Revision: m.Branch})
	}
	if m.Commit == "" {
		return sha, nil
	}
	want, err := c.resolveCommit(ctx, r.dir, m.Commit)
	if err != nil {
		return "", err
	}
	if want != sha {
		if want == "" {
			want = m.Commit
		}
		return "", &RefMismatchError{Branch: m.Branch, Want: want, Got: sha}
	}
	return sha, nil
}

// cleanupFailedAdd runs with the repo lock held.
func (c *Cache) cleanupFailedAdd(ctx context.Context, r *repo, wtPath, branch string, added bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.removeLocked(cctx, r, wtPath, branch, added); err != nil {
		c.log.WarnContext(ctx, "cleanup after failed worktree add", "path", wtPath, "err", err)
	}
}

// checkPath validates the worktree path and returns it cleaned.
func (c *Cache) checkPath(p string) (string, error) {
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
	// A worktree inside the cache could be mistaken for, or clobber, a
	// cached repository.
	if within(c.dir, filepath.Join(realParent, filepath.Base(p))) {
		return "", fmt.Errorf("%w: %s is inside the cache dir %s", ErrInvalidPath, p, c.dir)
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

// run executes git inside the worktree. GIT_DIR and GIT_WORK_TREE are
// explicit so that an agent deleting or rewriting the .git file cannot make
// git discover some other repository further up the tree.
func (w *Worktree) run(ctx context.Context, r gitRun) (gitResult, error) {
	r.dir = w.Path
	r.env = append([]string{"GIT_DIR=" + w.gitDir, "GIT_WORK_TREE=" + w.Path}, r.env...)
	return w.cache.run(ctx, r)
}

func (w *Worktree) out(ctx context.Context, args ...string) (string, error) {
	res, err := w.run(ctx, gitRun{args: args})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.stdout)), nil
}

// mergeAll merges the results (those with a sha) into the worktree's
// branch in order and returns the new HEAD; without merges, the base.
//
// Each merge is made without the worktree (batchMerges, or `git
// merge-tree --write-tree` then `git commit-tree`), and the worktree is
// moved to the last one at the end, which writes only the files the merges
// changed once, instead of a `git merge` per result refreshing the whole
// index each time: the integration of a 200-task flow is 200 merges.
// Where git is older than 2.38 (no --write-tree), the merges run in the
// worktree as before.
func (w *Worktree) mergeAll(ctx context.Context, merges []Ref, shas []string) (string, error) {
	var pending []pendingMerge
	for i, m := range merges {
		if shas[i] != "" { // "" changes nothing (see addWorktree)
			pending = append(pending, pendingMerge{branch: m.Branch, sha: shas[i]})
		}
	}
	head := w.BaseCommit
	if len(pending) == 0 {
		return head, nil
	}
	if !w.cache.mergeTreeWorks(ctx) {
		for _, m := range pending {
			if err := w.merge(ctx, m.branch, m.sha); err != nil {
				return "", err
			}
		}
		return w.head(ctx)
	}
	if len(pending) >= w.cache.batchFrom {
		merged, n, err := w.batchMerges(ctx, head, pending)
		switch {
		case err != nil && ctx.Err() != nil:
			return "", err
		case err != nil: // git merges them all below, as it would have
			w.cache.log.WarnContext(ctx, "batched merges failed; merging one by one", "path", w.Path, "err", err)
		default:
			head, pending = merged, pending[n:]
		}
	}
	for _, m := range pending {
		var err error
		if head, err = w.mergeTree(ctx, head, m.branch, m.sha); err != nil {
			return "", err
		}
	}
	// The branch and the files follow; the index is rewritten for the
	// changed paths only.
	if _, err := w.run(ctx, gitRun{args: []string{"reset", "--hard", "--quiet", "--no-recurse-submodules", head}}); err != nil {
		return "", fmt.Errorf("worktree: check out merged results in %s: %w", w.Path, err)
	}
	return head, nil
}

// mergeTree merges sha into head without touching the worktree and
// returns the merge commit.
func (w *Worktree) mergeTree(ctx context.Context, head, branch, sha string) (string, error) {
	res, err := w.run(ctx, gitRun{args: []string{"merge-tree", "--write-tree", "--no-messages", "--name-only", "-z", head, sha}})
	fields := strings.Split(string(res.stdout), "\x00")
	switch exitCode(err) {
	case 0:
	case 1: // conflicts: the tree, then the conflicted paths
		var paths []string
		for _, p := range fields[1:] {
			if p != "" {
				paths = append(paths, p)
			}
		}
		slices.Sort(paths)
		return "", &MergeConflictError{Branch: branch, Commit: sha, Paths: slices.Compact(paths)}
	default:
		return "", fmt.Errorf("worktree: merge %s: %w", branch, err)
	}
	tree := fields[0]
	if !isHex(tree) {
		return "", fmt.Errorf("worktree: merge %s: git merge-tree printed %q", branch, tree)
	}
	msg := fmt.Sprintf("Merge %s (%s) into %s", branch, shortSHA(sha), w.Branch)
	commit, err := w.out(ctx, "commit-tree", "-p", head, "-p", sha, "-m", msg, tree)
	if err != nil {
		return "", fmt.Errorf("worktree: merge %s: %w", branch, err)
	}
	return commit, nil
}

func (w *Worktree) head(ctx context.Context) (string, error) {
	sha, err := w.out(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("worktree: resolve HEAD in %s: %w", w.Path, err)
	}
	return sha, nil
}

// merge merges one dependency result. On conflict the merge is aborted so
// the worktree is left clean, and the conflicting paths are reported.
func (w *Worktree) merge(ctx context.Context, branch, sha string) error {
	msg := fmt.Sprintf("Merge %s (%s) into %s", branch, shortSHA(sha), w.Branch)
	_, err := w.run(ctx, gitRun{args: []string{"merge", "--no-ff", "--no-edit", "--no-verify", "--quiet", "-m", msg, sha}})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	paths, lsErr := w.unmergedPaths(ctx)
	if _, abortErr := w.run(ctx, gitRun{args: []string{"merge", "--abort"}}); abortErr != nil {
		w.cache.log.DebugContext(ctx, "merge --abort", "path", w.Path, "err", abortErr)
	}
	if lsErr == nil && len(paths) > 0 {
		return &MergeConflictError{Branch: branch, Commit: sha, Paths: paths}
	}
	return fmt.Errorf("worktree: merge %s: %w", branch, err)
}

func (w *Worktree) unmergedPaths(ctx context.Context) ([]string, error) {
	res, err := w.run(ctx, gitRun{args: []string{"ls-files", "--unmerged", "-z"}})
	if err != nil {
		return nil, err
	}
	var paths []string
	for rec := range bytes.SplitSeq(res.stdout, []byte{0}) {
		// "<mode> <sha> <stage>\t<path>"
		if i := bytes.IndexByte(rec, '\t'); i >= 0 {
			paths = append(paths, string(rec[i+1:]))
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// Remove deletes the worktree directory, its git metadata and its local
// branch in the cache. The pushed branch on the remote is left alone.
// Removing an already removed worktree is a no-op.
func (c *Cache) Remove(ctx context.Context, w *Worktree) error {
	if w == nil || w.cache == nil || w.repo == nil {
		return ErrNotPrepared
	}
	if w.cache != c {
		return errors.New("worktree: Remove called on a different cache than Prepare")
	}
	if err := w.repo.lock(ctx); err != nil {
		return err
	}
	defer w.repo.unlock()
	if w.removed.Load() {
		return nil
	}
	if err := w.restoreGitFile(); err != nil {
		c.log.DebugContext(ctx, "restore .git before removing", "path", w.Path, "err", err)
	}
	if err := c.removeLocked(ctx, w.repo, w.Path, w.Branch, true); err != nil {
		return err
	}
	w.removed.Store(true)
	c.checkAfter(ctx, w.repo)
	return nil
}

// checkAfter checks a cache at the end of an attempt: one that changed is
// quarantined (and logged) now, rather than at its next use.
func (c *Cache) checkAfter(ctx context.Context, r *repo) {
	if err := c.checkCache(ctx, r); err != nil && !errors.Is(err, ErrCacheTampered) {
		c.log.WarnContext(ctx, "check repo cache", "dir", r.dir, "err", err)
	}
}

// removeLocked removes a worktree and its branch (none if branch is "");
// caller holds r's lock.
// ownDir says wtPath is known to be a directory this package created, so it
// may be deleted even when git no longer recognises it as a worktree.
func (c *Cache) removeLocked(ctx context.Context, r *repo, wtPath, branch string, ownDir bool) error {
	gd := "--git-dir=" + r.dir
	if _, err := c.run(ctx, gitRun{args: []string{gd, "worktree", "remove", "--force", "--force", wtPath}}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// git refuses when the .git file is gone or the path is no longer
		// a registered worktree.
		c.log.DebugContext(ctx, "git worktree remove failed", "path", wtPath, "err", err, "remove_dir", ownDir)
		if ownDir {
			if rmErr := os.RemoveAll(wtPath); rmErr != nil {
				return fmt.Errorf("worktree: remove %s: %w", wtPath, rmErr)
			}
		}
		// git still lists the worktree; a successful remove forgot it
		// already (and Sweep prunes whatever else is stale).
		if _, err := c.run(ctx, gitRun{args: []string{gd, "worktree", "prune"}}); err != nil {
			return fmt.Errorf("worktree: prune: %w", err)
		}
	}
	if branch == "" {
		return nil
	}
	if _, err := c.run(ctx, gitRun{args: []string{gd, "update-ref", "-d", "refs/heads/" + branch}}); err != nil {
		return fmt.Errorf("worktree: delete branch %s: %w", branch, err)
	}
	return nil
}

// GitDir is the worktree's private git dir, located before anyone else
// could touch the worktree.
func (w *Worktree) GitDir() string { return w.gitDir }

// CommonDir is the cached bare repository the worktree belongs to.
func (w *Worktree) CommonDir() string { return w.repo.dir }

func (w *Worktree) usable() error {
	if w == nil || w.cache == nil || w.gitDir == "" {
		return ErrNotPrepared
	}
	if w.removed.Load() {
		return fmt.Errorf("%w: %s", ErrRemoved, w.Path)
	}
	return nil
}
