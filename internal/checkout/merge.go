package checkout

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

// mergeAll merges the results (those with a sha) into the checkout's
// branch in order and returns the new HEAD; without merges, the base.
//
// Each merge is made without the worktree (batchMerges, or `git
// merge-tree --write-tree` then `git commit-tree`), and the worktree is
// moved to the last one at the end, which writes only the files the merges
// changed once, instead of a `git merge` per result refreshing the whole
// index each time: the integration of a 200-task flow is 200 merges.
// Where git is older than 2.38 (no --write-tree), the merges run in the
// worktree as before.
func (w *Checkout) mergeAll(ctx context.Context, merges []repocache.Ref, shas []string) (string, error) {
	var pending []pendingMerge
	for i, m := range merges {
		if shas[i] != "" { // "" changes nothing (see repocache.Resolved)
			pending = append(pending, pendingMerge{branch: m.Branch, sha: shas[i]})
		}
	}
	head := w.BaseCommit
	if len(pending) == 0 {
		return head, nil
	}
	if !w.cs.mergeTreeWorks(ctx) {
		for _, m := range pending {
			if err := w.merge(ctx, m.branch, m.sha); err != nil {
				return "", err
			}
		}
		return w.head(ctx)
	}
	if len(pending) >= w.cs.batchFrom {
		merged, n, err := w.batchMerges(ctx, head, pending)
		switch {
		case err != nil && ctx.Err() != nil:
			return "", err
		case err != nil: // git merges them all below, as it would have
			w.cs.log.WarnContext(ctx, "batched merges failed; merging one by one", "path", w.Path, "err", err)
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
	if _, err := w.run(ctx, w.cmd("reset", "--hard", "--quiet", "--no-recurse-submodules", head)); err != nil {
		return "", fmt.Errorf("checkout: check out merged results in %s: %w", w.Path, err)
	}
	return head, nil
}

// mergeTreeWorks reports whether git can merge without a worktree
// (`git merge-tree --write-tree`, git 2.38).
func (cs *Checkouts) mergeTreeWorks(ctx context.Context) bool { return cs.git.AtLeast(ctx, 2, 38) }

// mergeTree merges sha into head without touching the worktree and
// returns the merge commit.
func (w *Checkout) mergeTree(ctx context.Context, head, branch, sha string) (string, error) {
	res, err := w.run(ctx, w.cmd("merge-tree", "--write-tree", "--no-messages", "--name-only", "-z", head, sha))
	fields := strings.Split(string(res.Stdout), "\x00")
	switch git.ExitCode(err) {
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
		return "", fmt.Errorf("checkout: merge %s: %w", branch, err)
	}
	tree := fields[0]
	if !git.IsHex(tree) {
		return "", fmt.Errorf("checkout: merge %s: git merge-tree printed %q", branch, tree)
	}
	msg := fmt.Sprintf("Merge %s (%s) into %s", branch, git.ShortID(sha), w.Branch)
	commit, err := w.out(ctx, "commit-tree", "-p", head, "-p", sha, "-m", msg, tree)
	if err != nil {
		return "", fmt.Errorf("checkout: merge %s: %w", branch, err)
	}
	return commit, nil
}

func (w *Checkout) head(ctx context.Context) (string, error) {
	sha, err := w.out(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("checkout: resolve HEAD in %s: %w", w.Path, err)
	}
	return sha, nil
}

// merge merges one dependency result. On conflict the merge is aborted so
// the worktree is left clean, and the conflicting paths are reported.
func (w *Checkout) merge(ctx context.Context, branch, sha string) error {
	msg := fmt.Sprintf("Merge %s (%s) into %s", branch, git.ShortID(sha), w.Branch)
	_, err := w.run(ctx, w.cmd("merge", "--no-ff", "--no-edit", "--no-verify", "--quiet", "-m", msg, sha))
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	paths, lsErr := w.unmergedPaths(ctx)
	if _, abortErr := w.run(ctx, w.cmd("merge", "--abort")); abortErr != nil {
		w.cs.log.DebugContext(ctx, "merge --abort", "path", w.Path, "err", abortErr)
	}
	if lsErr == nil && len(paths) > 0 {
		return &MergeConflictError{Branch: branch, Commit: sha, Paths: paths}
	}
	return fmt.Errorf("checkout: merge %s: %w", branch, err)
}

func (w *Checkout) unmergedPaths(ctx context.Context) ([]string, error) {
	res, err := w.run(ctx, w.cmd("ls-files", "--unmerged", "-z"))
	if err != nil {
		return nil, err
	}
	var paths []string
	for rec := range bytes.SplitSeq(res.Stdout, []byte{0}) {
		// "<mode> <sha> <stage>\t<path>"
		if i := bytes.IndexByte(rec, '\t'); i >= 0 {
			paths = append(paths, string(rec[i+1:]))
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}
