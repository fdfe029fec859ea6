package worktree

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
	if !errors.Is(err, ErrRevisionNotFound) {
		t.Fatalf("err = %v, want ErrRevisionNotFound", err)
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
		var nf *RevisionNotFoundError
		if !errors.Is(err, ErrRevisionNotFound) || !errors.As(err, &nf) {
			t.Errorf("base %q: err = %v, want *RevisionNotFoundError", base, err)
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
		if !errors.Is(err, ErrInvalidRevision) {
			t.Errorf("base %q: err = %v, want ErrInvalidRevision", base, err)
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
		if !errors.Is(err, ErrInvalidBranch) {
			t.Errorf("branch %q: err = %v, want ErrInvalidBranch", b, err)
		}
		assertNotExist(t, p)
	}
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ok/1",
		Path: wtPath(t), Merge: []Ref{{Branch: "bad..name"}}})
	if !errors.Is(err, ErrInvalidBranch) {
		t.Errorf("merge branch: err = %v, want ErrInvalidBranch", err)
	}
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/ok/1",
		Path: wtPath(t), Merge: []Ref{{Branch: "feature", Commit: "not-a-sha"}}})
	if !errors.Is(err, ErrInvalidRevision) {
		t.Errorf("merge commit: err = %v, want ErrInvalidRevision", err)
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
		if !errors.Is(err, ErrInvalidRepoURL) {
			t.Errorf("url %q: err = %v, want ErrInvalidRepoURL", u, err)
		}
	}
}

func TestPrepareUnreachableRepoLeavesNoCache(t *testing.T) {
	t.Parallel()
	cacheDir := t.TempDir()
	c := newTestCacheIn(t, cacheDir)
	missing := t.TempDir() // there, but no repository: git is asked, and fails
	_, err := c.Prepare(context.Background(), PrepareOptions{RepoURL: missing, Base: mainBranch, Branch: "drover/u/1", Path: wtPath(t)})
	var ge *GitError
	if !errors.As(err, &ge) || !errors.Is(err, ErrRepoNotFound) {
		t.Fatalf("err = %v, want a *GitError saying the repository is not there", err)
	}
	if ge.ExitCode <= 0 || ge.Stderr == "" || len(ge.Stderr) > maxStderr {
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
	if !errors.Is(err, ErrBranchExists) {
		t.Fatalf("err = %v, want ErrBranchExists", err)
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
	rd, _ := c.RepoDir(o.URL)
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
	if !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("deleted branch: err = %v, want ErrRevisionNotFound", err)
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

func TestCacheRejectsForeignDirectory(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	other := newOrigin(t)
	c := newTestCache(t)
	rd, err := c.RepoDir(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Something else sits where the clone of o.URL would be.
	gitT(t, "", "init", "--quiet", "--bare", rd)
	gitT(t, "", "--git-dir="+rd, "remote", "add", "origin", other.URL)
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/c/1", Path: wtPath(t)})
	if !errors.Is(err, ErrCacheCorrupt) {
		t.Fatalf("err = %v, want ErrCacheCorrupt", err)
	}
}

func TestConcurrentPrepare(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := newTestCache(t) // fresh: the first-use clone happens under contention too
	const n = 8
	ctx := context.Background()
	wts := make([]*Worktree, n)
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
	rd, _ := c.RepoDir(o.URL)
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
	r.unlock()
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/lock/1"})
}

func TestRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	rd, _ := c.RepoDir(o.URL)

	check := func(t *testing.T, w *Worktree) {
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
		if err := c.Remove(ctx, &Worktree{}); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("Remove(zero) = %v, want ErrNotPrepared", err)
		}
		if _, err := (&Worktree{}).Observe(ctx); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("zero Observe = %v, want ErrNotPrepared", err)
		}
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/rm/4"})
		if err := newTestCache(t).Remove(ctx, w); err == nil {
			t.Error("Remove via another cache succeeded")
		}
	})
}

// resolveBaseAndBranch, one cat-file where it can, answers what resolveBase
// and resolveCommit answer one rev-parse at a time.
func TestResolveBaseAndBranchAgreesWithRevParse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/resolve/a/1"})
	r := lockedRepo(t, c, o.URL)
	defer r.unlock()
	bases := []string{mainBranch, "refs/heads/" + mainBranch, "HEAD", "", "feature", "v1", "light",
		"refs/tags/v1", o.C1, o.C1[:8], "nosuch", "refs/heads/nosuch", "-x", "a b"}
	for _, base := range bases {
		for _, branch := range []string{"drover/resolve/a/1", "drover/resolve/b/1"} {
			gotBase, gotBranch, gotErr := c.resolveBaseAndBranch(ctx, r, base, branch)
			wantBase, wantErr := c.resolveBase(ctx, r, base)
			var wantBranch string
			if wantErr == nil {
				wantBranch, wantErr = c.resolveCommit(ctx, r.dir, "refs/heads/"+branch)
			}
			if gotBase != wantBase || gotBranch != wantBranch || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("base %q, branch %s: %q %q %v; rev-parse: %q %q %v", base, branch, gotBase, gotBranch, gotErr, wantBase, wantBranch, wantErr)
			}
		}
	}
	shas, err := c.resolveCommits(ctx, r.dir, "refs/tags/v1", o.C2+"^{tree}", "refs/heads/nosuch", "refs/remotes/origin/feature")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{o.C1, "", "", o.C3}; !slices.Equal(shas, want) {
		t.Errorf("resolveCommits = %q, want %q (a tag peeled, a tree no commit)", shas, want)
	}
}
