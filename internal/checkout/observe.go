package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

// maxCommits bounds Changes.Commits; an attempt making more commits than
// this is reported with its most recent ones.
const maxCommits = 10000

// DefaultCheckpointMessage is used when Checkpoint is given an empty message.
const DefaultCheckpointMessage = "drover: checkpoint"

// Changes is what an attempt changed relative to its baseline.
type Changes struct {
	// Compared against the baseline snapshot (content hash + mode), so
	// they include files the agent never told git about, and files it
	// committed itself. Sorted, slash-separated, relative to the worktree.
	Created, Modified, Deleted []string

	Commits []Commit // commits made since the baseline, oldest first (`git log --reverse Baseline..HEAD`)

	// Diff is the unified diff of the whole tree against Baseline as
	// `git add -A` would stage it, so it includes untracked files but not
	// ignored ones (exactly what Checkpoint would commit). Binary files
	// show as "Binary files ... differ".
	Diff          string
	DiffTruncated bool   // Diff was cut at Options.MaxDiffBytes
	DiffStat      string // `--stat` of the same

	// AgentGit says why the commits in the agent's repository were not
	// taken (agentgit.go): its HEAD is not a plain file, its objects do
	// not verify, it reads another repository's. Its files are in the
	// diff all the same, and the checkpoint commits them on the baseline.
	AgentGit string
}

// Commit is one commit made on top of the baseline.
type Commit struct {
	SHA, Subject, Author string // Author is "Name <email>"
}

// Observe computes what changed since the baseline. It brings the commits
// the agent made in its own repository into the cache and moves the
// attempt's branch to them (agentgit.go); otherwise it only reads git and
// the filesystem, and does not modify the worktree or its index.
func (w *Checkout) Observe(ctx context.Context) (*Changes, error) {
	if err := w.usable(); err != nil {
		return nil, err
	}
	ch := &Changes{}
	if err := w.importAgentCommits(ctx); err != nil {
		if ctx.Err() != nil || !errors.Is(err, ErrAgentGit) {
			return nil, err
		}
		ch.AgentGit = err.Error()
		w.cs.log.WarnContext(ctx, "the agent's commits are not taken", "path", w.Path, "err", err)
	}
	cur, err := takeSnapshot(ctx, w.Path, w.gitDir, w.baseline)
	if err != nil {
		return nil, err
	}
	w.last = cur
	ch.Created, ch.Modified, ch.Deleted = compare(w.baseline, cur)
	if ch.Commits, err = w.commits(ctx); err != nil {
		return nil, err
	}
	if err := w.diff(ctx, ch); err != nil {
		return nil, err
	}
	return ch, nil
}

func (w *Checkout) commits(ctx context.Context) ([]Commit, error) {
	if head, ok := w.headFromFiles(); ok && head == w.Baseline {
		return []Commit{}, nil // nothing committed since (see refs.go)
	}
	res, err := w.run(ctx, w.cmd(
		"-c", "log.showSignature=false",
		"log", "-z", "--reverse", "--no-decorate", "--no-color",
		"--max-count="+strconv.Itoa(maxCommits),
		"--format=%H%x1f%s%x1f%an <%ae>",
		w.Baseline+"..HEAD", "--",
	))
	if err != nil {
		return nil, fmt.Errorf("checkout: list commits in %s: %w", w.Path, err)
	}
	commits := []Commit{}
	for rec := range bytes.SplitSeq(res.Stdout, []byte{0}) {
		rec = bytes.TrimSpace(rec)
		if len(rec) == 0 {
			continue
		}
		f := strings.SplitN(string(rec), "\x1f", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("checkout: unexpected git log record %q", rec)
		}
		commits = append(commits, Commit{SHA: f[0], Subject: f[1], Author: f[2]})
	}
	return commits, nil
}

// diff stages the whole tree into a throwaway index and diffs that against
// the baseline, so untracked files appear without touching the real index
// the agent relies on. The staged index is kept for Checkpoint, which
// would stage the same again (see stagedIndex).
func (w *Checkout) diff(ctx context.Context, ch *Changes) error {
	w.dropStaged()
	idx, real, err := w.tempIndex()
	if err != nil {
		return err
	}
	staged := false
	defer func() {
		_ = os.Remove(idx + ".lock") // left only if git was killed
		if !staged {
			_ = os.Remove(idx)
		}
	}()
	// Commands on the throwaway index, their output bounded by limit
	// (0: git's default) and cut rather than refused.
	onIndex := func(limit int64, args ...string) git.Cmd {
		c := w.cmd(args...)
		c.Env, c.StdoutLimit, c.AllowTrunc = []string{"GIT_INDEX_FILE=" + idx}, limit, limit > 0
		return c
	}
	if _, err := w.run(ctx, onIndex(0, "add", "--all", "--", ".")); err != nil {
		return fmt.Errorf("checkout: stage for diff in %s: %w", w.Path, err)
	}
	w.staged, staged = &stagedIndex{path: idx, real: real}, true
	diffArgs := []string{"diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
		"--src-prefix=a/", "--dst-prefix=b/"}
	// The stat and the patch in one process: the stat, a blank line, the
	// patch. Room is left for a stat of up to statRoom beyond the patch's
	// own limit; a longer one takes a second run.
	res, err := w.run(ctx, onIndex(w.cs.maxDiff+statRoom, append(slices.Clone(diffArgs), "--patch-with-stat", w.Baseline, "--")...))
	if err != nil {
		return fmt.Errorf("checkout: diff in %s: %w", w.Path, err)
	}
	out := string(res.Stdout)
	if i := strings.Index(out, "\n\n"); i >= 0 || len(out) == 0 {
		if i >= 0 {
			ch.DiffStat, ch.Diff = out[:i+1], out[i+2:]
		}
		ch.DiffTruncated = res.Truncated || int64(len(ch.Diff)) > w.cs.maxDiff
		if ch.DiffTruncated {
			ch.Diff = cutDiff(ch.Diff, w.cs.maxDiff)
		}
		w.staged.diffed, w.staged.changed = true, len(out) > 0
		return nil
	}
	res, err = w.run(ctx, onIndex(w.cs.maxDiff, append(slices.Clone(diffArgs), w.Baseline, "--")...))
	if err != nil {
		return fmt.Errorf("checkout: diff in %s: %w", w.Path, err)
	}
	ch.Diff, ch.DiffTruncated = string(res.Stdout), res.Truncated
	if ch.DiffTruncated {
		ch.Diff = cutDiff(ch.Diff, w.cs.maxDiff)
	}
	stat, err := w.run(ctx, onIndex(0, append(slices.Clone(diffArgs), "--stat", w.Baseline, "--")...))
	if err != nil {
		return fmt.Errorf("checkout: diff --stat in %s: %w", w.Path, err)
	}
	ch.DiffStat = string(stat.Stdout)
	w.staged.diffed, w.staged.changed = true, ch.DiffStat != "" || ch.Diff != ""
	return nil
}

// statRoom is how long a diff's stat may be and still come with its patch
// from one git process. A variable only so that a test can make a stat
// too long for it without writing thousands of files.
var statRoom int64 = 1 << 20

// cutDiff cuts a diff to at most limit bytes at a line boundary, so
// consumers never see half a line.
func cutDiff(diff string, limit int64) string {
	if int64(len(diff)) > limit {
		diff = diff[:limit]
	}
	if i := strings.LastIndexByte(diff, '\n'); i >= 0 {
		return diff[:i+1]
	}
	return diff
}

// stagedIndex is the index Observe staged the whole tree into: what `git
// add --all` makes of the real index as it was then. Checkpoint moves it
// into place of the real index instead of staging everything again (one
// git process that reads every file's stat, 9 ms of each attempt in a
// 2,000-file repository), if the real index has not changed since.
// Whatever changed in the worktree after Observe is then not committed:
// the checkpoint is the diff Observe reported.
type stagedIndex struct {
	path string
	real statKey // the real index when copied; zero if there was none
	// diffed says Observe's diff of it against the baseline completed,
	// and changed whether that diff was empty.
	diffed, changed bool
}

// dropStaged removes the staged index, if any.
func (w *Checkout) dropStaged() {
	if w.staged != nil {
		_ = os.Remove(w.staged.path)
		w.staged = nil
	}
}

// useStaged moves the staged index over the real one, under git's index
// lock, and reports whether it did.
func (w *Checkout) useStaged() bool {
	s := w.staged
	if s == nil {
		return false
	}
	w.staged = nil
	real := filepath.Join(w.gitDir, "index")
	if indexStat(real) != s.real {
		_ = os.Remove(s.path)
		return false
	}
	lock, err := os.OpenFile(real+".lock", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		_ = os.Remove(s.path)
		return false
	}
	lock.Close()
	defer os.Remove(real + ".lock")
	if err := os.Rename(s.path, real); err != nil {
		_ = os.Remove(s.path)
		return false
	}
	return true
}

// indexStat is the stat of an index file, zero if it does not exist.
func indexStat(path string) statKey {
	info, err := os.Lstat(path)
	if err != nil {
		return statKey{}
	}
	return statOf(info)
}

// tempIndex returns the path for a throwaway index next to the real one,
// seeded with a copy of the real index so git can reuse its stat cache
// instead of rehashing every file, and the real index's stat. The caller
// removes it.
func (w *Checkout) tempIndex() (string, statKey, error) {
	f, err := os.CreateTemp(w.gitDir, "drover-observe-index-")
	if err != nil {
		return "", statKey{}, fmt.Errorf("checkout: temp index: %w", err)
	}
	name := f.Name()
	realPath := filepath.Join(w.gitDir, "index")
	real := indexStat(realPath)
	src, err := os.Open(realPath)
	if err == nil {
		_, err = io.Copy(f, src)
		src.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// No usable real index (the agent may have deleted it): an index
		// file that does not exist is an empty index to git; an empty
		// file is a corrupt one.
		if !errors.Is(err, fs.ErrNotExist) {
			w.cs.log.Debug("copy index for observe", "path", w.Path, "err", err)
		}
		if rmErr := os.Remove(name); rmErr != nil {
			return "", statKey{}, fmt.Errorf("checkout: temp index: %w", rmErr)
		}
	}
	return name, real, nil
}

// Checkpoint commits everything left uncommitted (as `git add -A` sees it)
// with the Drover identity and returns HEAD's sha. With nothing to commit it
// returns the current HEAD. Hooks never run. The attempt branch is left
// pointing at the returned commit even if the agent switched branches.
//
// Call it only once the agent has stopped: an index.lock left in the
// worktree is then stale (an agent killed mid-commit) and is removed.
func (w *Checkout) Checkpoint(ctx context.Context, message string) (string, error) {
	if err := w.usable(); err != nil {
		return "", err
	}
	if strings.TrimSpace(message) == "" {
		message = DefaultCheckpointMessage
	}
	lock := filepath.Join(w.gitDir, "index.lock")
	if err := os.Remove(lock); err == nil {
		w.cs.log.WarnContext(ctx, "removed stale index.lock", "path", w.Path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("checkout: remove stale index.lock: %w", err)
	}
	staged := w.staged
	if !w.useStaged() {
		staged = nil
		if _, err := w.run(ctx, w.cmd("add", "--all", "--", ".")); err != nil {
			return "", fmt.Errorf("checkout: stage checkpoint in %s: %w", w.Path, err)
		}
	}
	dirty, err := w.indexDiffersFromHead(ctx, staged)
	if err != nil {
		return "", fmt.Errorf("checkout: checkpoint in %s: %w", w.Path, err)
	}
	head := ""
	if dirty {
		if _, err := w.run(ctx, w.cmd("commit", "--quiet", "--no-verify", "--no-gpg-sign",
			"--cleanup=strip", "-m", message)); err != nil {
			return "", fmt.Errorf("checkout: checkpoint commit in %s: %w", w.Path, err)
		}
		head, _ = w.headFromFiles() // the commit git just made (see refs.go)
	} else if h, ok := w.headFromFiles(); ok && h == w.Baseline {
		head = h // a commit: Prepare resolved it
	}
	if head == "" {
		if head, err = w.head(ctx); err != nil {
			return "", err
		}
	}
	if err := w.pinBranch(ctx, head); err != nil {
		return "", err
	}
	w.checkpoint = head
	if w.agentGit {
		// What runs next (checks, a validator) sees the checkpoint.
		if err := w.makeAgentGitDir(head); err != nil {
			return "", err
		}
	}
	return head, nil
}

// indexDiffersFromHead reports whether the index has anything to commit.
// When it is the index Observe staged and diffed against the baseline,
// and HEAD is still the baseline, Observe's diff has said.
func (w *Checkout) indexDiffersFromHead(ctx context.Context, staged *stagedIndex) (bool, error) {
	if h, ok := w.headFromFiles(); ok && h == w.Baseline && staged != nil && staged.diffed {
		return staged.changed, nil
	}
	_, err := w.run(ctx, w.cmd("diff", "--cached", "--quiet", "--no-ext-diff", "HEAD", "--"))
	switch git.ExitCode(err) {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, err
}

// pinBranch makes the attempt branch point at head. Normally HEAD is that
// branch already; if the agent checked out something else, the worktree's
// content is still the attempt's result, and Push publishes the branch.
func (w *Checkout) pinBranch(ctx context.Context, head string) error {
	ref := "refs/heads/" + w.Branch
	if headFileIs(filepath.Join(w.gitDir, "HEAD"), ref) {
		return nil
	}
	sym, err := w.out(ctx, "symbolic-ref", "--quiet", "HEAD")
	if err == nil && sym == ref {
		return nil
	}
	if err != nil && git.ExitCode(err) != 1 { // 1 = detached HEAD
		return fmt.Errorf("checkout: read HEAD in %s: %w", w.Path, err)
	}
	w.cs.log.WarnContext(ctx, "agent moved HEAD off the attempt branch; moving the branch to HEAD",
		"path", w.Path, "branch", w.Branch, "head", sym, "sha", head)
	if _, err := w.out(ctx, "update-ref", "-m", "drover: checkpoint", ref, head); err != nil {
		return fmt.Errorf("checkout: move %s to %s: %w", w.Branch, git.ShortID(head), err)
	}
	return nil
}

// headFileIs reports whether the HEAD file at path is a plain file saying
// HEAD is the symbolic ref ref, written the way git writes it. That is
// what `git symbolic-ref HEAD` reads; any other form is left to git.
func headFileIs(path, ref string) bool {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() || info.Size() != int64(len("ref: "+ref+"\n")) {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && string(b) == "ref: "+ref+"\n"
}

// Push pushes the attempt branch to the repository's remote under the same
// name and returns the pushed sha. It does not force: a branch of that
// name with different history on the remote makes the push fail.
func (w *Checkout) Push(ctx context.Context) (string, error) {
	if err := w.usable(); err != nil {
		return "", err
	}
	cs, r := w.cs, w.repo
	// Without the repository's lock: a push writes nothing in the cache
	// (it pushes to the URL, below) and reads only this checkout's branch
	// and the objects under it, which nothing else deletes while the
	// branch is checked out here — Tidy deletes the branches no worktree
	// has checked out, and only Release and Remove, after the push, take
	// this one out. So the next attempt's Prepare (a fetch, under the
	// lock) does not wait for the push: with a real forge, seconds.
	ref := "refs/heads/" + w.Branch
	// Where Checkpoint left the branch, known to be a commit; git is asked
	// if it has moved since or is not a loose ref.
	sha, ok := looseBranch(r.Dir(), ref)
	if !ok || sha != w.checkpoint {
		var err error
		if sha, err = r.Commit(ctx, ref); err != nil {
			return "", err
		}
	}
	if sha == "" {
		return "", &repocache.RevisionNotFoundError{RepoURL: r.URL(), Revision: ref}
	}
	// Push to the URL, not to "origin": a push to a named remote also writes
	// a remote-tracking ref for the branch, and the cache would keep one per
	// attempt it ever ran. Every fetch checks connectivity against all the
	// cache's refs, so a worker's fetches grew slower with its age (0.2 s
	// at 3,000 refs against 0.01 s without). A dependent task fetches the
	// results it merges anyway.
	// To a local repository the push shows only the result branches it
	// needs (pushrefs.go).
	args := append([]string{"--git-dir=" + r.Dir(), "push", "--quiet", "--no-verify", "--no-recurse-submodules"},
		w.receivePackArgs()...)
	if _, err := cs.git.Run(ctx, git.In(cs.cache.Dir(), append(args, r.URL(), ref+":"+ref)...)); err != nil {
		return "", fmt.Errorf("checkout: push %s to %s: %w", w.Branch, r.URL(), err)
	}
	cs.log.InfoContext(ctx, "pushed attempt branch", "url", r.URL(), "branch", w.Branch, "sha", sha)
	return sha, nil
}

// ResetTo puts the checkout back to commit, after its checks ran in it:
// what they wrote, built or committed is dropped (ignored files are left:
// they are never pushed), and the attempt's branch points at commit
// again. Its git commands name the checkout's git dir as Prepare found it,
// so nothing the checks wrote in the checkout (a .git of their own, a
// .gitattributes) steers them.
func (w *Checkout) ResetTo(ctx context.Context, commit string) error {
	if err := w.usable(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"reset", "--hard", "--quiet", commit},
		{"clean", "-fdq"},
		{"update-ref", "refs/heads/" + w.Branch, commit},
	} {
		if _, err := w.run(ctx, w.cmd(args...)); err != nil {
			return err
		}
	}
	return nil
}

func sortStrings(lists ...[]string) {
	for _, l := range lists {
		slices.Sort(l)
	}
}
