package checkout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

func TestPrepareBase(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t) // shared: the subtests also exercise the cache under concurrency

	tests := []struct {
		name, base, want string
		files            []string // must exist in the worktree
	}{
		{"branch", mainBranch, o.C2, []string{"README.md", "src/app.go"}},
		{"other branch", "feature", o.C3, []string{"feature.txt"}},
		{"full branch ref", "refs/heads/feature", o.C3, []string{"feature.txt"}},
		{"annotated tag", "v1", o.C1, []string{"README.md"}},
		{"lightweight tag", "light", o.C1, []string{"README.md"}},
		{"full tag ref", "refs/tags/v1", o.C1, []string{"README.md"}},
		{"sha", o.C1, o.C1, []string{"README.md"}},
		{"short sha", o.C3[:10], o.C3, []string{"feature.txt"}},
		{"HEAD", "HEAD", o.C2, []string{"src/app.go"}},
		{"empty means HEAD", "", o.C2, []string{"src/app.go"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			branch := fmt.Sprintf("drover/flow-1/base-%d/1", i)
			w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: tt.base, Branch: branch})
			if w.BaseCommit != tt.want {
				t.Errorf("BaseCommit = %s, want %s", w.BaseCommit, tt.want)
			}
			if w.Baseline != tt.want {
				t.Errorf("Baseline = %s, want %s (no merges)", w.Baseline, tt.want)
			}
			if w.Branch != branch {
				t.Errorf("Branch = %q, want %q", w.Branch, branch)
			}
			if got := gitT(t, w.Path, "rev-parse", "HEAD"); got != tt.want {
				t.Errorf("worktree HEAD = %s, want %s", got, tt.want)
			}
			if got := gitT(t, w.Path, "symbolic-ref", "HEAD"); got != "refs/heads/"+branch {
				t.Errorf("worktree is on %s, want refs/heads/%s", got, branch)
			}
			for _, f := range tt.files {
				if _, err := os.Stat(filepath.Join(w.Path, f)); err != nil {
					t.Errorf("file %s missing: %v", f, err)
				}
			}
			if got := gitT(t, w.Path, "status", "--porcelain"); got != "" {
				t.Errorf("fresh worktree not clean:\n%s", got)
			}
		})
	}
}

func TestPrepareHEADFollowsRemoteDefaultBranch(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	o.git(t, "symbolic-ref", "HEAD", "refs/heads/feature")
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "HEAD", Branch: "drover/f/t/1"})
	if w.BaseCommit != o.C3 {
		t.Errorf("BaseCommit = %s, want feature tip %s", w.BaseCommit, o.C3)
	}
}

func TestPrepareEmptyRemoteHasNoHEAD(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "empty.git")
	gitT(t, "", "init", "--quiet", "--bare", dir)
	c := newTestCache(t)
	p := wtPath(t)
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: dir, Base: "HEAD", Branch: "drover/x/1", Path: p})
	if !errors.Is(err, repocache.ErrRevisionNotFound) {
		t.Fatalf("err = %v, want repocache.ErrRevisionNotFound", err)
	}
	assertNotExist(t, p)
}

func TestPrepareRevisionNotFound(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	for _, base := range []string{"nope", "feature/nope", "v9", "deadbeef", strings.Repeat("0", 40)} {
		p := wtPath(t)
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: base, Branch: "drover/x/1", Path: p})
		var nf *repocache.RevisionNotFoundError
		if !errors.Is(err, repocache.ErrRevisionNotFound) || !errors.As(err, &nf) {
			t.Errorf("base %q: err = %v, want *repocache.RevisionNotFoundError", base, err)
			continue
		}
		if nf.Revision != base || nf.RepoURL != o.URL {
			t.Errorf("base %q: error data = %+v", base, nf)
		}
		assertNotExist(t, p)
	}
	// The branch was never created, so it is still available.
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/x/1"})
}

func TestPrepareInvalidRevision(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	for _, base := range []string{"--upload-pack=evil", "main:README.md", "a b"} {
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: base, Branch: "drover/x/1", Path: wtPath(t)})
		if !errors.Is(err, repocache.ErrInvalidRevision) {
			t.Errorf("base %q: err = %v, want repocache.ErrInvalidRevision", base, err)
		}
	}
}

func TestPrepareInvalidBranch(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	bad := []string{"", "-b", "a..b", "has space", "x.lock", "trailing/", "@{-1}", "HEAD", "a~1", "a:b", "back\\slash", "q?"}
	for _, b := range bad {
		p := wtPath(t)
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: b, Path: p})
		if !errors.Is(err, repocache.ErrInvalidBranch) {
			t.Errorf("branch %q: err = %v, want repocache.ErrInvalidBranch", b, err)
		}
		assertNotExist(t, p)
	}
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ok/1",
		Path: wtPath(t), Merge: []repocache.Ref{{Branch: "bad..name"}}})
	if !errors.Is(err, repocache.ErrInvalidBranch) {
		t.Errorf("merge branch: err = %v, want repocache.ErrInvalidBranch", err)
	}
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ok/1",
		Path: wtPath(t), Merge: []repocache.Ref{{Branch: "feature", Commit: "not-a-sha"}}})
	if !errors.Is(err, repocache.ErrInvalidRevision) {
		t.Errorf("merge commit: err = %v, want repocache.ErrInvalidRevision", err)
	}
}

func TestPrepareInvalidPath(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	cacheDir := t.TempDir()
	c := newTestCacheIn(t, cacheDir)
	existing := t.TempDir()
	tests := map[string]string{
		"relative":       "relative/wt",
		"empty":          "",
		"exists":         existing,
		"missing parent": filepath.Join(t.TempDir(), "no", "such", "parent"),
		"inside cache":   filepath.Join(cacheDir, "wt"),
		"parent is file": filepath.Join(existing, "file", "wt"),
	}
	writeFile(t, filepath.Join(existing, "file"), "x", 0o644)
	for name, p := range tests {
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/p/1", Path: p})
		if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%s (%q): err = %v, want ErrInvalidPath", name, p, err)
		}
	}
	// Inside the cache through a symlink is still inside.
	link := filepath.Join(t.TempDir(), "cachelink")
	if err := os.Symlink(cacheDir, link); err != nil {
		t.Fatal(err)
	}
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/p/1", Path: filepath.Join(link, "wt")})
	if !errors.Is(err, ErrInvalidPath) {
		t.Errorf("inside cache via symlink: err = %v, want ErrInvalidPath", err)
	}
}

func TestPrepareInvalidRepoURL(t *testing.T) {
	t.Parallel()
	c := newTestCache(t)
	for _, u := range []string{"", "relative/repo", "-oProxyCommand=evil"} {
		_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: u, Base: mainBranch, Branch: "drover/u/1", Path: wtPath(t)})
		if !errors.Is(err, repocache.ErrInvalidRepoURL) {
			t.Errorf("url %q: err = %v, want repocache.ErrInvalidRepoURL", u, err)
		}
	}
}

func TestPrepareUnreachableRepoLeavesNoCache(t *testing.T) {
	t.Parallel()
	cacheDir := t.TempDir()
	c := newTestCacheIn(t, cacheDir)
	missing := t.TempDir() // there, but no repository: git is asked, and fails
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: missing, Base: mainBranch, Branch: "drover/u/1", Path: wtPath(t)})
	var ge *git.Error
	if !errors.As(err, &ge) || !errors.Is(err, repocache.ErrRepoNotFound) {
		t.Fatalf("err = %v, want a *git.Error saying the repository is not there", err)
	}
	if ge.ExitCode <= 0 || ge.Stderr == "" || len(ge.Stderr) > git.MaxStderr {
		t.Errorf("GitError = %+v, want exit code, bounded stderr", ge)
	}
	if len(ge.Args) == 0 || ge.Args[1] != "fetch" {
		t.Errorf("GitError.Args = %q, want the fetch command", ge.Args)
	}
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("cache dir not empty after failed clone: %v", entries)
	}
}

func TestPrepareBranchExists(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/dup/1"})
	p := wtPath(t)
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/dup/1", Path: p})
	if !errors.Is(err, repocache.ErrBranchExists) {
		t.Fatalf("err = %v, want repocache.ErrBranchExists", err)
	}
	assertNotExist(t, p)
}

// An attempt branch on the remote with the same name as a local attempt
// branch must not disturb the live worktree (fetch goes to refs/remotes).
func TestFetchDoesNotTouchCheckedOutBranches(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/a/1"})
	writeFile(t, filepath.Join(w.Path, "a.txt"), "a\n", 0o644)
	if _, err := w.Checkpoint(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Someone else moves the pushed branch on the remote.
	gitT(t, o.Seed, "fetch", "--quiet", "origin")
	gitT(t, o.Seed, "branch", "drover/f/a/1", "origin/drover/f/a/1")
	moved := o.pushNew(t, "drover/f/a/1", "other.txt", "other\n")
	// The next Prepare fetches; the checked-out branch must stay put.
	local := gitT(t, w.Path, "rev-parse", "HEAD")
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "drover/f/a/1", Branch: "drover/f/b/1"})
	if got := gitT(t, w.Path, "rev-parse", "HEAD"); got != local {
		t.Errorf("live worktree HEAD moved from %s to %s", local, got)
	}
	rd := repoDir(t, c, o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "rev-parse", "refs/remotes/origin/drover/f/a/1"); got != moved {
		t.Errorf("remote-tracking ref = %s, want %s", got, moved)
	}
}

func TestCacheFetchesNewCommits(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	cacheDir := t.TempDir()
	c := newTestCacheIn(t, cacheDir)
	w1 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/r/1"})
	if w1.BaseCommit != o.C2 {
		t.Fatalf("first BaseCommit = %s, want %s", w1.BaseCommit, o.C2)
	}
	c4 := o.pushNew(t, mainBranch, "later.txt", "later\n")
	c5 := o.pushNew(t, mainBranch, "x.txt", "x\n") // advances main again
	o.git(t, "branch", "brand-new", c4)
	o.git(t, "tag", "v2", c4)
	o.git(t, "branch", "-D", "feature")

	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/r/2"})
	if w2.BaseCommit != c5 {
		t.Errorf("second BaseCommit = %s, want new main %s", w2.BaseCommit, c5)
	}
	if got := readFile(t, filepath.Join(w2.Path, "later.txt")); got != "later\n" {
		t.Errorf("later.txt = %q", got)
	}
	w3 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "brand-new", Branch: "drover/r/3"})
	if w3.BaseCommit != c4 {
		t.Errorf("new branch BaseCommit = %s, want %s", w3.BaseCommit, c4)
	}
	w4 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "v2", Branch: "drover/r/4"})
	if w4.BaseCommit != c4 {
		t.Errorf("new tag BaseCommit = %s, want %s", w4.BaseCommit, c4)
	}
	// Deleted on the remote: pruned from the cache.
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "feature", Branch: "drover/r/5", Path: wtPath(t)})
	if !errors.Is(err, repocache.ErrRevisionNotFound) {
		t.Errorf("deleted branch: err = %v, want repocache.ErrRevisionNotFound", err)
	}

	// A new Cache on the same directory (a restarted worker) reuses the clone.
	c2 := newTestCacheIn(t, cacheDir)
	w5 := prepare(t, c2, PrepareOptions{RepoURL: o.URL, Base: "HEAD", Branch: "drover/r/6"})
	if w5.BaseCommit != c5 {
		t.Errorf("reused cache BaseCommit = %s, want %s", w5.BaseCommit, c5)
	}
	entries, _ := os.ReadDir(cacheDir)
	if len(entries) != 1 {
		t.Errorf("cache dir has %d entries, want 1 clone: %v", len(entries), entries)
	}
}

func TestConcurrentPrepare(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t) // fresh: the first-use clone happens under contention too
	const n = 8
	ctx := context.Background()
	wts := make([]*Checkout, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		p := wtPath(t)
		wg.Go(func() {
			w, err := c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: fmt.Sprintf("drover/conc/t%d/1", i), Path: p})
			if err != nil {
				errs[i] = err
				return
			}
			wts[i] = w
			// Then a whole attempt, concurrently with the others.
			writeFile(t, filepath.Join(w.Path, fmt.Sprintf("out-%d.txt", i)), "result\n", 0o644)
			if _, err := w.Observe(ctx); err != nil {
				errs[i] = err
				return
			}
			if _, err := w.Checkpoint(ctx, fmt.Sprintf("task %d", i)); err != nil {
				errs[i] = err
				return
			}
			if _, err := w.Push(ctx); err != nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("attempt %d: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	paths := map[string]bool{}
	for i, w := range wts {
		if paths[w.Path] {
			t.Errorf("duplicate path %s", w.Path)
		}
		paths[w.Path] = true
		files := o.lsTree(t, "refs/heads/"+w.Branch)
		if !slices.Contains(files, fmt.Sprintf("out-%d.txt", i)) {
			t.Errorf("origin branch %s lacks out-%d.txt: %v", w.Branch, i, files)
		}
	}
	for _, w := range wts {
		wg.Go(func() {
			if err := c.Remove(ctx, w); err != nil {
				t.Errorf("Remove %s: %v", w.Path, err)
			}
		})
	}
	wg.Wait()
	rd := repoDir(t, c, o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("worktrees left after removing all:\n%s", got)
	}
	if got := gitT(t, "", "--git-dir="+rd, "for-each-ref", "refs/heads/"); got != "" {
		t.Errorf("branches left in cache:\n%s", got)
	}
}

func TestConcurrentDifferentRepos(t *testing.T) {
	t.Parallel()
	c := newTestCache(t)
	origins := []*origin{newOrigin(t), newOrigin(t), newOrigin(t)}
	var wg sync.WaitGroup
	for i, o := range origins {
		for j := range 3 {
			p := wtPath(t)
			wg.Go(func() {
				w, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "feature", Branch: fmt.Sprintf("drover/%d/%d", i, j), Path: p})
				if err != nil {
					t.Errorf("repo %d attempt %d: %v", i, j, err)
					return
				}
				if w.BaseCommit != o.C3 {
					t.Errorf("repo %d: BaseCommit = %s, want %s", i, w.BaseCommit, o.C3)
				}
			})
		}
	}
	wg.Wait()
}

func TestPrepareCanceledContext(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := wtPath(t)
	_, err := c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/cancel/1", Path: p})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertNotExist(t, p)
}

func TestPrepareWaitsForLockRespectingContext(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	r := lockedRepo(t, c, o.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Prepare(ctx, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/lock/1", Path: wtPath(t)})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	r.Unlock()
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/lock/1"})
}

func TestRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	rd := repoDir(t, c, o.URL)

	check := func(t *testing.T, w *Checkout) {
		t.Helper()
		if err := c.Remove(ctx, w); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		assertNotExist(t, w.Path)
		if got := gitT(t, "", "--git-dir="+rd, "worktree", "list", "--porcelain"); strings.Contains(got, w.Path) {
			t.Errorf("worktree list still shows %s:\n%s", w.Path, got)
		}
		if _, err := gitE("", "--git-dir="+rd, "rev-parse", "--verify", "--quiet", "refs/heads/"+w.Branch); err == nil {
			t.Errorf("branch %s still exists", w.Branch)
		}
		if err := c.Remove(ctx, w); err != nil {
			t.Errorf("second Remove: %v", err)
		}
		if _, err := w.Observe(ctx); !errors.Is(err, ErrRemoved) {
			t.Errorf("Observe after Remove: err = %v, want ErrRemoved", err)
		}
		if _, err := w.Checkpoint(ctx, "x"); !errors.Is(err, ErrRemoved) {
			t.Errorf("Checkpoint after Remove: err = %v, want ErrRemoved", err)
		}
		if _, err := w.Push(ctx); !errors.Is(err, ErrRemoved) {
			t.Errorf("Push after Remove: err = %v, want ErrRemoved", err)
		}
	}

	t.Run("dirty", func(t *testing.T) {
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/1"})
		writeFile(t, filepath.Join(w.Path, "untracked.txt"), "x", 0o644)
		writeFile(t, filepath.Join(w.Path, "README.md"), "changed", 0o644)
		writeFile(t, filepath.Join(w.Path, "debug.log"), "ignored", 0o644)
		check(t, w)
	})
	t.Run("git dir deleted by agent", func(t *testing.T) {
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/2"})
		if err := os.RemoveAll(filepath.Join(w.Path, ".git")); err != nil {
			t.Fatal(err)
		}
		check(t, w)
	})
	t.Run("directory already gone", func(t *testing.T) {
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/3"})
		if err := os.RemoveAll(w.Path); err != nil {
			t.Fatal(err)
		}
		check(t, w)
	})
	t.Run("branch name reusable", func(t *testing.T) {
		prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/1"})
	})
	t.Run("misuse", func(t *testing.T) {
		if err := c.Remove(ctx, nil); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("Remove(nil) = %v, want ErrNotPrepared", err)
		}
		if err := c.Remove(ctx, &Checkout{}); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("Remove(zero) = %v, want ErrNotPrepared", err)
		}
		if _, err := (&Checkout{}).Observe(ctx); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("zero Observe = %v, want ErrNotPrepared", err)
		}
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/4"})
		if err := newTestCache(t).Remove(ctx, w); err == nil {
			t.Error("Remove via another cache succeeded")
		}
	})
}

// TestPrepareFetchesWhatItNeeds: after the clone, a Prepare fetches its
// base and the results it merges, not the remote's other branches (a remote
// holds one per attempt Drover ever ran), and still sees every move of what
// it asked for.
func TestPrepareFetchesWhatItNeeds(t *testing.T) {
	o := newOrigin(t)
	c := newTestCache(t)
	cache := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/a/1"}).CommonDir()

	results := map[string]string{}
	for _, b := range []string{"drover/f/x/1", "drover/f/y/1", "drover/f/z/1"} {
		gitT(t, o.Seed, "branch", b, mainBranch)
		results[b] = o.pushNew(t, b, strings.ReplaceAll(b, "/", "-")+".txt", b+"\n")
	}
	main := o.pushNew(t, mainBranch, "later.txt", "later\n")
	remoteRefs := func() string {
		return gitT(t, "", "--git-dir="+cache, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/drover/")
	}

	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/b/1"})
	if w.BaseCommit != main {
		t.Errorf("base %s, want main's new commit %s", w.BaseCommit, main)
	}
	if got := remoteRefs(); got != "" {
		t.Errorf("a Prepare without merges fetched result branches:\n%s", got)
	}

	w = prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "HEAD", Branch: "drover/f/c/1",
		Merge: []repocache.Ref{{Branch: "drover/f/y/1", Commit: results["drover/f/y/1"]}}})
	if w.BaseCommit != main {
		t.Errorf("base HEAD at %s, want %s", w.BaseCommit, main)
	}
	if got := remoteRefs(); got != "refs/remotes/origin/drover/f/y/1" {
		t.Errorf("result branches in the cache:\n%s\nwant only the merged one", got)
	}
	if _, err := os.Stat(filepath.Join(w.Path, "drover-f-y-1.txt")); err != nil {
		t.Errorf("the merged result is missing: %v", err)
	}

	for _, base := range []string{"v1", "refs/tags/light", "refs/heads/feature", o.C1} {
		prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: base, Branch: "drover/f/base/" + filepath.Base(base)})
	}
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "nope", Branch: "drover/f/d/1", Path: wtPath(t)})
	var nf *repocache.RevisionNotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Prepare at a base the remote lacks: %v, want a repocache.RevisionNotFoundError", err)
	}
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/e/1", Path: wtPath(t),
		Merge: []repocache.Ref{{Branch: "drover/f/gone/1"}}})
	if !errors.As(err, &nf) {
		t.Errorf("Prepare merging a branch the remote lacks: %v, want a repocache.RevisionNotFoundError", err)
	}
}

// An integration of more results than are fetched one by one fetches its
// flow's results by their prefix: not the other flows' result branches,
// which a remote keeps for every flow it ever served.
func TestIntegrationFetchesItsFlowsResults(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t)
	cache := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/g/a/1"}).CommonDir()
	var merge []repocache.Ref
	for i := range 70 {
		b := fmt.Sprintf("drover/g/t%02d/1", i)
		gitT(t, o.Seed, "checkout", "--quiet", "-B", b, mainBranch)
		writeFile(t, filepath.Join(o.Seed, fmt.Sprintf("g%02d.txt", i)), "g\n", 0o644)
		merge = append(merge, repocache.Ref{Branch: b, Commit: o.commit(t, b)})
	}
	gitT(t, o.Seed, "checkout", "--quiet", "-B", "drover/h/t/1", mainBranch)
	writeFile(t, filepath.Join(o.Seed, "h.txt"), "h\n", 0o644)
	o.commit(t, "h")
	gitT(t, o.Seed, "checkout", "--quiet", mainBranch)
	gitT(t, o.Seed, "push", "--quiet", "origin", "refs/heads/drover/*:refs/heads/drover/*")

	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/g/integration", Merge: merge, NoAgent: true})
	got := gitT(t, "", "--git-dir="+cache, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/drover/")
	refs := strings.Fields(got)
	if len(refs) != len(merge) || slices.ContainsFunc(refs, func(r string) bool { return !strings.HasPrefix(r, "refs/remotes/origin/drover/g/t") }) {
		t.Errorf("result branches in the cache after the integration's fetch:\n%s\nwant the flow's 70 only", got)
	}
	for i := range merge {
		if _, err := os.Stat(filepath.Join(w.Path, fmt.Sprintf("g%02d.txt", i))); err != nil {
			t.Errorf("result %d not merged: %v", i, err)
		}
	}
}
