package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

func TestObserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/1"})
	p := func(name string) string { return filepath.Join(w.Path, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// What an agent might do, most of it without telling git.
	writeFile(t, p("README.md"), "hello\nworld\n", 0o644)          // modified
	must(os.Remove(p("src/app.go")))                               // deleted
	writeFile(t, p("new.txt"), "brand new content\n", 0o644)       // untracked
	writeFile(t, p("dir/nested/deep.txt"), "deep\n", 0o644)        // untracked, nested
	writeFile(t, p("bin.dat"), "\x00\x01\x02binary\x00", 0o644)    // binary
	writeFile(t, p("debug.log"), "ignored by .gitignore\n", 0o644) // ignored by git, still a change
	must(os.Chmod(p("notes.txt"), 0o755))                          // mode change only
	must(os.Symlink("README.md", p("link")))                       // symlink
	must(os.Symlink("/nonexistent/target", p("dangling")))         // never followed
	must(os.Symlink("src", p("dirlink")))                          // a link to a dir is one entry
	must(os.MkdirAll(p("emptydir"), 0o755))                        // directories alone are no change
	must(os.Remove(p("script.sh")))                                // file replaced by a symlink
	must(os.Symlink("README.md", p("script.sh")))
	// The agent commits one file itself.
	writeFile(t, p("committed.txt"), "committed by the agent\n", 0o644)
	gitT(t, w.Path, "add", "committed.txt")
	gitT(t, w.Path, "commit", "--quiet", "-m", "agent commit")
	agentCommit := gitT(t, w.Path, "rev-parse", "HEAD")

	indexBefore, err := os.ReadFile(filepath.Join(w.gitDir, "index"))
	must(err)
	statusBefore := gitT(t, w.Path, "status", "--porcelain")

	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	assertStrings(t, "Created", ch.Created, []string{"bin.dat", "committed.txt", "dangling", "debug.log", "dir/nested/deep.txt", "dirlink", "link", "new.txt"})
	assertStrings(t, "Modified", ch.Modified, []string{"README.md", "notes.txt", "script.sh"})
	assertStrings(t, "Deleted", ch.Deleted, []string{"src/app.go"})
	if len(ch.Commits) != 1 || ch.Commits[0] != (Commit{SHA: agentCommit, Subject: "agent commit", Author: testAuthor}) {
		t.Errorf("Commits = %+v, want the agent's commit %s", ch.Commits, agentCommit)
	}
	assertContains(t, "Diff", ch.Diff,
		"diff --git a/new.txt b/new.txt\nnew file mode 100644",
		"+brand new content\n",
		"diff --git a/dir/nested/deep.txt b/dir/nested/deep.txt",
		"+committed by the agent\n",
		" hello\n+world\n",
		"diff --git a/src/app.go b/src/app.go\ndeleted file mode 100644",
		"diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 100755",
		"diff --git a/link b/link\nnew file mode 120000",
		"+/nonexistent/target\n",
		"Binary files /dev/null and b/bin.dat differ",
	)
	if strings.Contains(ch.Diff, "debug.log") {
		t.Errorf("Diff includes an ignored file (Checkpoint would not commit it):\n%s", ch.Diff)
	}
	if ch.DiffTruncated {
		t.Error("DiffTruncated = true for a small diff")
	}
	assertContains(t, "DiffStat", ch.DiffStat, "new.txt", "README.md", "src/app.go", "files changed")

	// Observe is read-only: the agent's index and status are as they were.
	indexAfter, err := os.ReadFile(filepath.Join(w.gitDir, "index"))
	must(err)
	if !bytes.Equal(indexBefore, indexAfter) {
		t.Error("Observe modified the worktree's index")
	}
	if got := gitT(t, w.Path, "status", "--porcelain"); got != statusBefore {
		t.Errorf("status changed by Observe:\nbefore:\n%s\nafter:\n%s", statusBefore, got)
	}
	if strings.Contains(statusBefore, "A  new.txt") || !strings.Contains(statusBefore, "?? new.txt") {
		t.Errorf("new.txt should still be untracked:\n%s", statusBefore)
	}
	// The index it staged is kept for Checkpoint, and only that one.
	staged := func() {
		t.Helper()
		leftovers, _ := filepath.Glob(filepath.Join(w.gitDir, "drover-observe-index-*"))
		if w.staged == nil || !slices.Equal(leftovers, []string{w.staged.path}) {
			t.Errorf("temporary index files %v, want only the one staged for Checkpoint", leftovers)
		}
	}
	staged()

	// Observing again gives the same answer.
	ch2, err := w.Observe(ctx)
	must(err)
	if !slices.Equal(ch.Created, ch2.Created) || ch.Diff != ch2.Diff || len(ch2.Commits) != 1 {
		t.Error("second Observe differs from the first")
	}
	staged()

	// Changing a symlink's target is a modification.
	must(os.Remove(p("link")))
	must(os.Symlink("notes.txt", p("link")))
	ch3, err := w.Observe(ctx)
	must(err)
	if !slices.Contains(ch3.Created, "link") {
		t.Errorf("link should still be created relative to baseline: %v", ch3.Created)
	}
	assertContains(t, "Diff", ch3.Diff, "+notes.txt")
}

func TestObserveNoChanges(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/none"})
	ch, err := w.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Created)+len(ch.Modified)+len(ch.Deleted)+len(ch.Commits) != 0 || ch.Diff != "" || ch.DiffStat != "" {
		t.Errorf("changes in an untouched worktree: %+v", ch)
	}
	// Touching a file without changing content or mode is no change.
	readme := filepath.Join(w.Path, "README.md")
	writeFile(t, readme, readFile(t, readme), 0o644)
	// Group/other bits are not something git records.
	if err := os.Chmod(filepath.Join(w.Path, "notes.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	ch, err = w.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Modified) != 0 {
		t.Errorf("Modified = %v, want none", ch.Modified)
	}
}

// Files that were untracked at baseline time (left by the merge of nothing,
// or generated) are part of the baseline: only changes after it count.
func TestObserveBaselineIncludesUntracked(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/untracked"})
	// Simulate a file that existed before the agent ran but not in git.
	writeFile(t, filepath.Join(w.Path, "pre.txt"), "pre\n", 0o644)
	snap, err := takeSnapshot(context.Background(), w.Path, w.gitDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.baseline = snap
	if err := os.Remove(filepath.Join(w.Path, "pre.txt")); err != nil {
		t.Fatal(err)
	}
	ch, err := w.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "Deleted", ch.Deleted, []string{"pre.txt"})
	assertStrings(t, "Created", ch.Created, nil)
}

func TestObserveDiffTruncated(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCacheWith(t, testOptions{MaxDiffBytes: 1024})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/big"})
	writeFile(t, filepath.Join(w.Path, "big.txt"), strings.Repeat("a line of text\n", 1000), 0o644)
	ch, err := w.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !ch.DiffTruncated || len(ch.Diff) > 1024 || !strings.HasSuffix(ch.Diff, "\n") {
		t.Errorf("DiffTruncated = %v, len(Diff) = %d, want truncated at a line under 1024", ch.DiffTruncated, len(ch.Diff))
	}
	assertContains(t, "DiffStat", ch.DiffStat, "big.txt | 1000 +")
	assertStrings(t, "Created", ch.Created, []string{"big.txt"})
}

// A stat longer than the patch's limit and the room left for it is asked
// for apart: complete, and the patch still cut to the limit. Not parallel:
// it shrinks the package's statRoom.
func TestObserveLongDiffStat(t *testing.T) {
	defer func(room int64) { statRoom = room }(statRoom)
	statRoom = 10
	o := newOrigin(t)
	c := newTestCacheWith(t, testOptions{MaxDiffBytes: 1024})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/stat"})
	writeFile(t, filepath.Join(w.Path, "big.txt"), strings.Repeat("a line of text\n", 1000), 0o644)
	for i := range 30 {
		writeFile(t, filepath.Join(w.Path, fmt.Sprintf("file-with-a-long-name-%02d.txt", i)), "x\n", 0o644)
	}
	ch, err := w.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !ch.DiffTruncated || len(ch.Diff) > 1024 || !strings.HasPrefix(ch.Diff, "diff --git ") || !strings.HasSuffix(ch.Diff, "\n") {
		t.Errorf("DiffTruncated = %v, Diff = %q, want a patch truncated at a line under 1024", ch.DiffTruncated, ch.Diff)
	}
	if len(ch.DiffStat) <= 1034 {
		t.Fatalf("the stat (%d bytes) fits in the room: the test needs more files", len(ch.DiffStat))
	}
	assertContains(t, "DiffStat", ch.DiffStat, "big.txt                      | 1000 +", "file-with-a-long-name-29.txt |    1 +", "31 files changed")
}

// An agent that deletes its .git must not make Observe or Checkpoint
// operate on some other repository.
func TestObserveWithoutGitFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/obs/nogit"})
	if err := os.RemoveAll(filepath.Join(w.Path, ".git")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Path, "new.txt"), "new\n", 0o644)
	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "Created", ch.Created, []string{"new.txt"})
	assertContains(t, "Diff", ch.Diff, "+new\n")
	sha, err := w.Checkpoint(ctx, "without .git")
	if err != nil {
		t.Fatal(err)
	}
	rd := repoDir(t, c, o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "rev-parse", "refs/heads/"+w.Branch); got != sha {
		t.Errorf("branch at %s, want checkpoint %s", got, sha)
	}
}

func TestCheckpointAndPush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/flow-1/task-a/1"})

	writeFile(t, filepath.Join(w.Path, "result.txt"), "the result\n", 0o644)
	writeFile(t, filepath.Join(w.Path, "README.md"), "rewritten\n", 0o644)
	writeFile(t, filepath.Join(w.Path, "debug.log"), "ignored\n", 0o644)
	if err := os.Remove(filepath.Join(w.Path, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(w.Path, "script.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	sha, err := w.Checkpoint(ctx, "task a: done")
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if sha == w.Baseline {
		t.Fatal("Checkpoint made no commit")
	}
	if got := gitT(t, w.Path, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%P", sha); got != "Drover <drover@localhost>|Drover <drover@localhost>|task a: done|"+w.Baseline {
		t.Errorf("checkpoint commit = %q", got)
	}
	if got := gitT(t, w.Path, "status", "--porcelain"); got != "" {
		t.Errorf("worktree not clean after Checkpoint (ignored files excluded):\n%s", got)
	}

	// Nothing left: same HEAD, no empty commit.
	again, err := w.Checkpoint(ctx, "")
	if err != nil || again != sha {
		t.Errorf("second Checkpoint = %s, %v; want %s", again, err, sha)
	}

	pushed, err := w.Push(ctx)
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if pushed != sha {
		t.Errorf("Push = %s, want %s", pushed, sha)
	}
	if got := o.git(t, "rev-parse", "refs/heads/"+w.Branch); got != sha {
		t.Errorf("origin branch at %s, want %s", got, sha)
	}
	files := o.lsTree(t, "refs/heads/"+w.Branch)
	assertStrings(t, "origin tree", files, []string{".gitignore", "README.md", "result.txt", "script.sh", "src/app.go"})
	if got := o.git(t, "show", "refs/heads/"+w.Branch+":result.txt"); got != "the result" {
		t.Errorf("result.txt on origin = %q", got)
	}
	if got := o.git(t, "ls-tree", "refs/heads/"+w.Branch, "script.sh"); !strings.HasPrefix(got, "100644 ") {
		t.Errorf("script.sh mode on origin = %q, want 100644", got)
	}
	// The cache keeps no ref per pushed branch: its fetches check
	// connectivity against every ref it has.
	if got := gitT(t, "", "--git-dir="+w.repo.Dir(), "for-each-ref", "--format=%(refname)", "refs/remotes/origin/drover/"); got != "" {
		t.Errorf("the push left remote-tracking refs in the cache:\n%s", got)
	}
	// Pushing again is a no-op success.
	if again, err := w.Push(ctx); err != nil || again != sha {
		t.Errorf("second Push = %s, %v", again, err)
	}

	// Observe still reports against the baseline, checkpoint included.
	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "Created", ch.Created, []string{"debug.log", "result.txt"})
	assertStrings(t, "Modified", ch.Modified, []string{"README.md", "script.sh"})
	assertStrings(t, "Deleted", ch.Deleted, []string{"notes.txt"})
	if len(ch.Commits) != 1 || ch.Commits[0].SHA != sha || ch.Commits[0].Author != "Drover <drover@localhost>" {
		t.Errorf("Commits = %+v", ch.Commits)
	}
}

// TestCheckpointCommitsWhatObserveStaged: Checkpoint commits the tree as
// Observe staged it, so the commit is the diff Observe reported even if a
// straggler writes afterwards, unless the real index changed meanwhile;
// then it stages again.
func TestCheckpointCommitsWhatObserveStaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCacheWith(t, testOptions{IdleWorktrees: 1})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cp/staged"})
	committed := func(sha string) []string {
		return strings.Split(gitT(t, w.Path, "diff-tree", "--no-commit-id", "--name-only", "-r", w.Baseline, sha), "\n")
	}

	writeFile(t, filepath.Join(w.Path, "seen.txt"), "seen\n", 0o644)
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Path, "late.txt"), "late\n", 0o644)
	sha, err := w.Checkpoint(ctx, "observed")
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "committed", committed(sha), []string{"seen.txt"})
	if st := gitT(t, w.Path, "status", "--porcelain"); st != "?? late.txt" {
		t.Errorf("status after Checkpoint = %q, want late.txt untracked", st)
	}
	if left, _ := filepath.Glob(filepath.Join(w.gitDir, "drover-observe-index-*")); len(left) != 0 {
		t.Errorf("staged index left after Checkpoint: %v", left)
	}

	// The real index (Drover's, in the admin dir: no agent reaches it)
	// changed after Observe: everything is staged anew.
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Path, "added.txt"), "added\n", 0o644)
	gitT(t, w.Path, "--git-dir="+w.gitDir, "--work-tree="+w.Path, "add", "added.txt")
	sha, err = w.Checkpoint(ctx, "restaged")
	if err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "committed", committed(sha), []string{"added.txt", "late.txt", "seen.txt"})
	if pushed, err := w.Push(ctx); err != nil || pushed != sha {
		t.Fatalf("Push = %s, %v; want %s", pushed, err, sha)
	}

	// An Observe without its Checkpoint leaves nothing that stops reuse.
	writeFile(t, filepath.Join(w.Path, "more.txt"), "more\n", 0o644)
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if c.Idle() != 1 {
		t.Error("checkpoint not parked after an Observe without Checkpoint")
	}
}

// With the refs packed, nothing can be read from loose ref files and git
// is asked: the agent's commits are still listed, the checkpoint pushed.
func TestObserveAndPushWithPackedRefs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cp/packed"})
	writeFile(t, filepath.Join(w.Path, "agent.txt"), "agent\n", 0o644)
	gitT(t, w.Path, "add", "agent.txt")
	gitT(t, w.Path, "commit", "--quiet", "-m", "by the agent")
	agent := gitT(t, w.Path, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(w.Path, "left.txt"), "left\n", 0o644)
	gitT(t, "", "--git-dir="+w.repo.Dir(), "pack-refs", "--all", "--prune")
	if _, ok := w.headFromFiles(); ok {
		t.Fatal("HEAD read from files with the branch packed")
	}
	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Commits) != 1 || ch.Commits[0].SHA != agent {
		t.Errorf("Commits = %+v, want the agent's %s", ch.Commits, agent)
	}
	sha, err := w.Checkpoint(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, "", "--git-dir="+w.repo.Dir(), "pack-refs", "--all", "--prune")
	if pushed, err := w.Push(ctx); err != nil || pushed != sha {
		t.Fatalf("Push = %s, %v; want %s", pushed, err, sha)
	}
	if got := o.git(t, "rev-parse", "refs/heads/"+w.Branch+"^"); got != agent {
		t.Errorf("pushed checkpoint's parent %s, want the agent's commit %s", got, agent)
	}
}

func TestCheckpointNothingToCommit(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "v1", Branch: "drover/cp/none"})
	sha, err := w.Checkpoint(context.Background(), "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if sha != w.Baseline {
		t.Errorf("Checkpoint = %s, want Baseline %s", sha, w.Baseline)
	}
}

func TestCheckpointCustomIdentity(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCacheWith(t, testOptions{AuthorName: "Bot", AuthorEmail: "bot@example.com"})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cp/ident"})
	writeFile(t, filepath.Join(w.Path, "x"), "x", 0o644)
	sha, err := w.Checkpoint(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, w.Path, "log", "-1", "--format=%an <%ae>", sha); got != "Bot <bot@example.com>" {
		t.Errorf("author = %q", got)
	}
}

// If the agent wanders off the attempt branch, the branch follows the
// worktree so that Push publishes what the worktree contains.
func TestCheckpointAfterAgentSwitchedBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cp/switch"})
	for _, tc := range []struct{ name, checkout string }{{"other branch", "-b"}, {"detached", "--detach"}} {
		if tc.checkout == "-b" {
			gitT(t, w.Path, "checkout", "--quiet", "-b", "agent-branch")
		} else {
			gitT(t, w.Path, "checkout", "--quiet", "--detach")
		}
		writeFile(t, filepath.Join(w.Path, tc.name+".txt"), tc.name, 0o644)
		sha, err := w.Checkpoint(ctx, tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pushed, err := w.Push(ctx)
		if err != nil {
			t.Fatalf("%s: Push: %v", tc.name, err)
		}
		if pushed != sha {
			t.Errorf("%s: pushed %s, want checkpoint %s", tc.name, pushed, sha)
		}
		if files := o.lsTree(t, "refs/heads/"+w.Branch); !slices.Contains(files, tc.name+".txt") {
			t.Errorf("%s: origin lacks %s.txt: %v", tc.name, tc.name, files)
		}
	}
}

func TestPushRejectedWhenRemoteDiverged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c1, c2 := newTestCache(t), newTestCache(t)
	w1 := prepare(t, c1, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/same/1"})
	w2 := prepare(t, c2, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/same/1"})
	for i, w := range []*Checkout{w1, w2} {
		writeFile(t, filepath.Join(w.Path, "f.txt"), strings.Repeat("x", i+1), 0o644)
		if _, err := w.Checkpoint(ctx, "c"); err != nil {
			t.Fatal(err)
		}
	}
	first, err := w1.Push(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w2.Push(ctx)
	var ge *git.Error
	if !errors.As(err, &ge) || ge.ExitCode != 1 || !strings.Contains(ge.Stderr, "rejected") {
		t.Fatalf("second push: err = %v, want a rejected *git.Error", err)
	}
	if got := o.git(t, "rev-parse", "refs/heads/drover/same/1"); got != first {
		t.Errorf("origin branch at %s, want first push %s (no force)", got, first)
	}
}

// attempt prepares, writes files, checkpoints and pushes, returning the result.
func attempt(t *testing.T, c *Checkouts, o *origin, branch string, files map[string]string, merge ...repocache.Ref) repocache.Ref {
	t.Helper()
	ctx := context.Background()
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: branch, Merge: merge})
	for name, content := range files {
		writeFile(t, filepath.Join(w.Path, name), content, 0o644)
	}
	if _, err := w.Checkpoint(ctx, "result of "+branch); err != nil {
		t.Fatal(err)
	}
	sha, err := w.Push(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return repocache.Ref{Branch: branch, Commit: sha}
}

// mergeModes runs a test of merging with git merging without a worktree
// (merge-tree, git 2.38), the same after trying batchMerges on every
// merge, and in the worktree, as an older git must.
func mergeModes(t *testing.T, test func(t *testing.T, newCache func(testing.TB) *Checkouts)) {
	for _, mode := range []string{"merge-tree", "batched", "in worktree"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			test(t, func(t testing.TB) *Checkouts {
				opts := testOptions{BatchMerges: map[string]int{"merge-tree": -1, "batched": 1}[mode]}
				if mode == "in worktree" {
					opts.Git = oldGit(t)
				}
				c := newTestCacheWith(t, opts)
				if works := c.mergeTreeWorks(context.Background()); works != (mode != "in worktree") {
					t.Fatalf("%s: the cache takes git for one with merge-tree: %v", mode, works)
				}
				return c
			})
		})
	}
}

func TestMergeResults(t *testing.T) { mergeModes(t, testMergeResults) }

func testMergeResults(t *testing.T, newTestCache func(testing.TB) *Checkouts) {
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	a := attempt(t, c, o, "drover/flow/a/1", map[string]string{"a.txt": "from a\n"})
	b := attempt(t, c, o, "drover/flow/b/1", map[string]string{"b.txt": "from b\n"})

	// Merging works from the same cache and from a cache that never saw
	// the attempts (another worker).
	for name, cache := range map[string]*Checkouts{"same cache": c, "other cache": newTestCache(t)} {
		t.Run(name, func(t *testing.T) {
			w := prepare(t, cache, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/flow/c/1", Merge: []repocache.Ref{a, b}})
			if w.BaseCommit != o.C2 {
				t.Errorf("BaseCommit = %s, want %s", w.BaseCommit, o.C2)
			}
			if w.Baseline == w.BaseCommit {
				t.Fatal("Baseline equals BaseCommit after merges")
			}
			if got := readFile(t, filepath.Join(w.Path, "a.txt")); got != "from a\n" {
				t.Errorf("a.txt = %q", got)
			}
			if got := readFile(t, filepath.Join(w.Path, "b.txt")); got != "from b\n" {
				t.Errorf("b.txt = %q", got)
			}
			// Two merge commits by Drover, first parent chain from the base.
			merges := strings.Split(gitT(t, w.Path, "log", "--merges", "--format=%an|%s|%P", w.BaseCommit+"..HEAD"), "\n")
			if len(merges) != 2 {
				t.Fatalf("merge commits = %q, want 2", merges)
			}
			for _, m := range merges {
				if !strings.HasPrefix(m, "Drover|Merge drover/flow/") {
					t.Errorf("merge commit = %q", m)
				}
			}
			if !strings.HasSuffix(merges[1], " "+a.Commit) || !strings.HasSuffix(merges[0], " "+b.Commit) {
				t.Errorf("merge parents = %q, want a then b", merges)
			}
			// The merges are the baseline, not changes by the agent.
			ch, err := w.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ch.Created)+len(ch.Modified)+len(ch.Deleted)+len(ch.Commits) != 0 || ch.Diff != "" {
				t.Errorf("merged results reported as changes: %+v", ch)
			}
			if err := cache.Remove(ctx, w); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A result built on top of an earlier one merges as a no-op.
	d := attempt(t, c, o, "drover/flow/d/1", map[string]string{"d.txt": "d\n"}, a)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/flow/e/1", Merge: []repocache.Ref{a, d}})
	for _, f := range []string{"a.txt", "d.txt"} {
		if _, err := os.Stat(filepath.Join(w.Path, f)); err != nil {
			t.Errorf("%s missing: %v", f, err)
		}
	}
	// An empty Commit accepts the branch tip.
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/flow/f/1", Merge: []repocache.Ref{{Branch: a.Branch}}})
}

// TestMergeSkipsWhatChangesNothing: a result at the base (a task that
// committed nothing) and a result merged already are not merged again, and
// their branches are not even looked up.
func TestMergeSkipsWhatChangesNothing(t *testing.T) { mergeModes(t, testMergeSkipsWhatChangesNothing) }

func testMergeSkipsWhatChangesNothing(t *testing.T, newTestCache func(testing.TB) *Checkouts) {
	o := newOrigin(t)
	c := newTestCache(t)
	a := attempt(t, c, o, "drover/skip/a/1", map[string]string{"a.txt": "a\n"})
	idle := attempt(t, c, o, "drover/skip/idle/1", nil)
	if idle.Commit != o.C2 {
		t.Fatalf("a result without changes is at %s, want the base %s", idle.Commit, o.C2)
	}
	gone := repocache.Ref{Branch: "drover/skip/gone/1", Commit: o.C2} // at the base, branch deleted since
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/skip/c/1",
		Merge: []repocache.Ref{idle, a, gone, {Branch: "drover/skip/again/1", Commit: a.Commit}}})
	merges := gitT(t, w.Path, "log", "--merges", "--format=%s", w.BaseCommit+"..HEAD")
	if merges != "Merge drover/skip/a/1 ("+a.Commit[:12]+") into drover/skip/c/1" {
		t.Errorf("merge commits:\n%s\nwant one, of a", merges)
	}
	if got := readFile(t, filepath.Join(w.Path, "a.txt")); got != "a\n" {
		t.Errorf("a.txt = %q", got)
	}
	// A result found merged already once resolved (its branch named
	// without a commit) does not stop the next one from being resolved.
	b := attempt(t, c, o, "drover/skip/b/1", map[string]string{"b.txt": "b\n"})
	w = prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/skip/e/1",
		Merge: []repocache.Ref{a, {Branch: a.Branch}, {Branch: b.Branch}}})
	if got := readFile(t, filepath.Join(w.Path, "b.txt")); got != "b\n" {
		t.Errorf("b.txt = %q, want b's result merged after a's repeated one", got)
	}
	// Nothing to merge at all: the baseline is the base.
	w = prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/skip/d/1", Merge: []repocache.Ref{idle}})
	if w.Baseline != w.BaseCommit {
		t.Errorf("baseline %s, want the base %s", w.Baseline, w.BaseCommit)
	}
}

func TestMergeConflict(t *testing.T) { mergeModes(t, testMergeConflict) }

func testMergeConflict(t *testing.T, newTestCache func(testing.TB) *Checkouts) {
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	a := attempt(t, c, o, "drover/conf/a/1", map[string]string{"README.md": "version a\n", "a.txt": "a\n"})
	b := attempt(t, c, o, "drover/conf/b/1", map[string]string{"README.md": "version b\n", "notes.txt": "b notes\n"})

	p := wtPath(t)
	_, err := c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/conf/c/1", Path: p, Merge: []repocache.Ref{a, b}})
	if !errors.Is(err, ErrMergeConflict) {
		t.Fatalf("err = %v, want ErrMergeConflict", err)
	}
	var mc *MergeConflictError
	if !errors.As(err, &mc) {
		t.Fatalf("err = %T, want *MergeConflictError", err)
	}
	if mc.Branch != b.Branch || mc.Commit != b.Commit {
		t.Errorf("conflict on %s@%s, want %s@%s", mc.Branch, mc.Commit, b.Branch, b.Commit)
	}
	assertStrings(t, "conflict paths", mc.Paths, []string{"README.md"})
	assertNotExist(t, p)
	rd := repoDir(t, c, o.URL)
	if _, err := gitE("", "--git-dir="+rd, "rev-parse", "--verify", "--quiet", "refs/heads/drover/conf/c/1"); err == nil {
		t.Error("branch of the failed attempt left in the cache")
	}
	// The same attempt can be prepared again, e.g. with only one dependency.
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/conf/c/1", Merge: []repocache.Ref{a}})
	if got := readFile(t, filepath.Join(w.Path, "README.md")); got != "version a\n" {
		t.Errorf("README.md = %q", got)
	}
}

func TestMergeRefProblems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	a := attempt(t, c, o, "drover/ref/a/1", map[string]string{"a.txt": "a\n"})
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ref/local/1"})

	// The same with the result branches listed in one process, as for
	// many merges (listRefsFrom): a's result again and again first.
	for _, pad := range []int{0, listRefsFrom} {
		var before []repocache.Ref
		for range pad {
			before = append(before, a)
		}
		merge := func(m repocache.Ref) []repocache.Ref { return append(slices.Clone(before), m) }
		p := wtPath(t)
		_, err := c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ref/b/1", Path: p,
			Merge: merge(repocache.Ref{Branch: a.Branch, Commit: o.C1})})
		if pad > 0 {
			// a's result is merged already, so the moved branch is not
			// even looked at; another name for it is.
			o.git(t, "update-ref", "refs/heads/drover/ref/moved/1", a.Commit)
			_, err = c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ref/b/1", Path: p,
				Merge: merge(repocache.Ref{Branch: "drover/ref/moved/1", Commit: o.C3})})
		}
		var rm *repocache.RefMismatchError
		if !errors.Is(err, repocache.ErrRefMismatch) || !errors.As(err, &rm) {
			t.Fatalf("pad %d: moved branch: err = %v, want *repocache.RefMismatchError", pad, err)
		}
		if rm.Got != a.Commit || (pad == 0 && (rm.Branch != a.Branch || rm.Want != o.C1)) || (pad > 0 && rm.Want != o.C3) {
			t.Errorf("pad %d: repocache.RefMismatchError = %+v", pad, rm)
		}
		assertNotExist(t, p)

		_, err = c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ref/b/1", Path: p,
			Merge: merge(repocache.Ref{Branch: "drover/ref/missing/1", Commit: o.C3})})
		var nf *repocache.RevisionNotFoundError
		if !errors.As(err, &nf) || nf.Revision != "drover/ref/missing/1" {
			t.Fatalf("pad %d: missing branch: err = %v, want *repocache.RevisionNotFoundError", pad, err)
		}
		assertNotExist(t, p)

		// Only remote branches count: a local attempt branch of that name
		// that was never pushed is not a result.
		_, err = c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ref/b/1", Path: p,
			Merge: merge(repocache.Ref{Branch: "drover/ref/local/1"})})
		if !errors.Is(err, repocache.ErrRevisionNotFound) {
			t.Fatalf("pad %d: unpushed branch: err = %v, want repocache.ErrRevisionNotFound", pad, err)
		}
	}
}

// An agent killed in the middle of a git command leaves index.lock behind;
// the checkpoint must still save its work.
func TestCheckpointRemovesStaleIndexLock(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cp/lock"})
	writeFile(t, filepath.Join(w.Path, "work.txt"), "precious\n", 0o644)
	writeFile(t, filepath.Join(w.gitDir, "index.lock"), "", 0o644)
	sha, err := w.Checkpoint(context.Background(), "after crash")
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if got := gitT(t, w.Path, "show", sha+":work.txt"); got != "precious" {
		t.Errorf("work.txt in checkpoint = %q", got)
	}
}
