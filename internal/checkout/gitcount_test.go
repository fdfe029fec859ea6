package checkout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/repocache"
)

// The git commands of a whole attempt: each one costs a process.
func TestAttemptGitCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c, rec := newRecordingCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/a/1"})
	wantVerbs(t, rec, "first Prepare",
		"version",                           // once per git, here for the clone's refspecs
		"init", "remote", "fetch", "remote", // clone
		"cat-file", "worktree add") // the base and the new branch, in one process

	writeFile(t, filepath.Join(w.Path, "out.txt"), "result\n", 0o644)
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	// HEAD and the branch are read from their files where git just wrote
	// them (refs.go), and Checkpoint commits what Observe staged.
	wantVerbs(t, rec, "Observe", "add", "diff")
	sha, err := w.Checkpoint(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Checkpoint", "commit")
	if pushed, err := w.Push(ctx); err != nil || pushed != sha {
		t.Fatalf("Push = %s, %v; want %s", pushed, err, sha)
	}
	wantVerbs(t, rec, "Push", "push")

	// Nothing changed: Observe's diff says so, and Checkpoint asks git
	// nothing (the real index does not change either).
	w0 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/nothing/1"})
	rec.Verbs()
	if _, err := w0.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Observe of nothing", "add", "diff")
	if sha, err := w0.Checkpoint(ctx, "nothing"); err != nil || sha != w0.Baseline {
		t.Fatalf("Checkpoint = %s, %v; want the baseline %s", sha, err, w0.Baseline)
	}
	wantVerbs(t, rec, "Checkpoint of nothing")
	if err := c.Remove(ctx, w0); err != nil {
		t.Fatal(err)
	}
	rec.Verbs()
	if err := c.Remove(ctx, w); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Remove", "worktree remove", "update-ref")

	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/b/1"})
	wantVerbs(t, rec, "second Prepare", "fetch", "cat-file", "worktree add")
	if w2.Baseline != o.C2 {
		t.Errorf("Baseline = %s, want %s", w2.Baseline, o.C2)
	}
	// In the worktree, git finds the agent's own repository, at the baseline.
	if got := gitT(t, w2.Path, "rev-parse", "--absolute-git-dir", "HEAD"); got != filepath.Join(w2.Path, ".git")+"\n"+w2.Baseline {
		t.Errorf("git in the worktree says %q, want its .git and the baseline", got)
	}

	// Merging two results: two processes each, without the worktree, and
	// one checkout of the last merge.
	gitT(t, o.Seed, "branch", "drover/count/ma/1", mainBranch)
	gitT(t, o.Seed, "branch", "drover/count/mb/1", mainBranch)
	a, b := o.pushNew(t, "drover/count/ma/1", "ma.txt", "a\n"), o.pushNew(t, "drover/count/mb/1", "mb.txt", "b\n")
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/m/1",
		Merge: []repocache.Ref{{Branch: "drover/count/ma/1", Commit: a}, {Branch: "drover/count/mb/1", Commit: b}}})
	wantVerbs(t, rec, "Prepare with merges", "fetch", "cat-file", "rev-parse", "rev-parse",
		"rev-parse", "rev-parse", "worktree add", "merge-tree", "commit-tree", "merge-tree", "commit-tree", "reset")

	// From three results on, three processes merge them all (batchMerges).
	gitT(t, o.Seed, "branch", "drover/count/mc/1", mainBranch)
	mc := o.pushNew(t, "drover/count/mc/1", "mc.txt", "c\n")
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/n/1",
		Merge: []repocache.Ref{{Branch: "drover/count/ma/1", Commit: a}, {Branch: "drover/count/mb/1", Commit: b}, {Branch: "drover/count/mc/1", Commit: mc}}})
	wantVerbs(t, rec, "Prepare with three merges", "fetch", "cat-file", "rev-parse", "rev-parse",
		"rev-parse", "rev-parse", "rev-parse", "rev-parse", "worktree add", "rev-list", "diff-tree", "fast-import", "reset")

	// From listRefsFrom results on, their branches are read in one process.
	var many []repocache.Ref
	for i := range listRefsFrom {
		branch := fmt.Sprintf("drover/count/many-%d/1", i)
		gitT(t, o.Seed, "branch", branch, mainBranch)
		many = append(many, repocache.Ref{Branch: branch, Commit: o.pushNew(t, branch, fmt.Sprintf("many-%d.txt", i), "x\n")})
	}
	w3 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/many/1", Merge: many})
	wantVerbs(t, rec, "Prepare with many merges", "fetch", "cat-file", "for-each-ref",
		"worktree add", "rev-list", "diff-tree", "fast-import", "reset")
	for i := range listRefsFrom {
		if got := readFile(t, filepath.Join(w3.Path, fmt.Sprintf("many-%d.txt", i))); got != "x\n" {
			t.Errorf("many-%d.txt = %q", i, got)
		}
	}
}

// When git cannot remove the worktree, the directory is deleted by hand and
// git told to forget it.
func TestRemoveFallbackPrunes(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c, rec := newRecordingCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/count/rm/1"})
	// Its admin dir no longer says where it is: git does not know it.
	if err := os.Remove(filepath.Join(w.gitDir, "gitdir")); err != nil {
		t.Fatal(err)
	}
	rec.Verbs()
	if err := c.Remove(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Remove", "worktree remove", "worktree prune", "update-ref")
	rd := repoDir(t, c, o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "worktree", "list", "--porcelain"); strings.Contains(got, w.Path) {
		t.Errorf("worktree list still shows %s:\n%s", w.Path, got)
	}
}

func TestReadGitFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	common := filepath.Join(root, "repo.git")
	gitDir := filepath.Join(common, "worktrees", "wt")
	if err := os.MkdirAll(gitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(common, "worktrees", "file"), "", 0o644)
	if err := os.Symlink(gitDir, filepath.Join(common, "worktrees", "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, content, want string
	}{
		{"as git writes it", "gitdir: " + gitDir + "\n", gitDir},
		{"no newline", "gitdir: " + gitDir, gitDir},
		{"not clean", "gitdir: " + common + "/worktrees/./wt/\n", gitDir},
		{"symlink resolved", "gitdir: " + filepath.Join(common, "worktrees", "link") + "\n", gitDir},
		{"relative", "gitdir: repo.git/worktrees/wt\n", ""},
		{"outside the repository", "gitdir: " + root + "\n", ""},
		{"escaping the repository", "gitdir: " + gitDir + "/../../..\n", ""},
		{"missing", "gitdir: " + gitDir + "-gone\n", ""},
		{"a file", "gitdir: " + filepath.Join(common, "worktrees", "file") + "\n", ""},
		{"two lines", "gitdir: " + gitDir + "\nx\n", ""},
		{"CRLF", "gitdir: " + gitDir + "\r\n", ""},
		{"other syntax", "gitdir:" + gitDir + "\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		f := filepath.Join(t.TempDir(), ".git")
		writeFile(t, f, tt.content, 0o644)
		got, ok := readGitFile(f, common)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: readGitFile = %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}
	if got, ok := readGitFile(filepath.Join(root, "none"), common); ok {
		t.Errorf("no .git file: readGitFile = %q, true", got)
	}
}

func TestHeadFileIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ref = "refs/heads/drover/x/1"
	tests := []struct {
		name, content string
		want          bool
	}{
		{"as git writes it", "ref: " + ref + "\n", true},
		{"other branch", "ref: refs/heads/drover/x/2\n", false},
		{"prefix of the branch", "ref: refs/heads/drover/x/10\n", false},
		{"detached", strings.Repeat("a", 40) + "\n", false},
		{"no newline", "ref: " + ref, false},
		{"extra space", "ref:  " + ref + "\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		writeFile(t, p, tt.content, 0o644)
		if got := headFileIs(p, ref); got != tt.want {
			t.Errorf("%s: headFileIs = %v, want %v", tt.name, got, tt.want)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "as git writes it"), link); err != nil {
		t.Fatal(err)
	}
	if headFileIs(link, ref) {
		t.Error("a symlinked HEAD is taken as read")
	}
	if headFileIs(filepath.Join(dir, "missing"), ref) {
		t.Error("a missing HEAD is taken as read")
	}
}

// Prepares waiting for the repository while another one fetches share the
// next fetch.
func TestConcurrentPreparesShareFetch(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c, rec := newRecordingCache(t)
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/share/0"})
	c4 := o.pushNew(t, mainBranch, "later.txt", "later\n")
	r := lockedRepo(t, c, o.URL)
	const n = 3
	wts := make([]*Checkout, n)
	var wg sync.WaitGroup
	for i := range n {
		p := wtPath(t)
		wg.Go(func() {
			w, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch,
				Branch: "drover/share/" + string(rune('a'+i)), Path: p})
			wts[i] = w
			if err != nil {
				t.Error(err)
			}
		})
	}
	waitForLockWaiters(t, n)
	rec.Verbs()
	r.Unlock()
	wg.Wait()
	fetches := 0
	for _, v := range rec.Verbs() {
		if v == "fetch" {
			fetches++
		}
	}
	if fetches != 1 {
		t.Errorf("%d Prepares fetched %d times, want once", n, fetches)
	}
	for _, w := range wts {
		if w != nil && w.BaseCommit != c4 {
			t.Errorf("%s: BaseCommit = %s, want the pushed %s", w.Branch, w.BaseCommit, c4)
		}
	}
}

// waitForLockWaiters waits until n goroutines are blocked taking a repo
// lock, so they all asked for a fetch before the lock is released.
func waitForLockWaiters(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if strings.Count(stacks, "repocache.(*Repo).Lock(") >= n {
			return
		}
	}
	t.Fatalf("%d goroutines never waited for the repo lock", n)
}
