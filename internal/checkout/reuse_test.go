package checkout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A released checkout serves the next Prepare of its repository: moved to
// the new path, on the new branch at the new base, with nothing of the last
// attempt left (its changes, untracked and ignored files, nested
// repositories, its local branch), and without `git worktree add`.
func TestReleasedCheckoutIsReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c, rec := newRecordingCacheWith(t, testOptions{IdleWorktrees: 1})
	a := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "v1", Branch: "drover/reuse/a/1"})
	writeFile(t, filepath.Join(a.Path, "README.md"), "changed by a\n", 0o644)
	writeFile(t, filepath.Join(a.Path, "new.txt"), "new\n", 0o644)
	if _, err := a.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Checkpoint(ctx, "a's work"); err != nil {
		t.Fatal(err)
	}
	// What a verification command leaves: ignored and untracked files, a
	// repository of its own.
	writeFile(t, filepath.Join(a.Path, "build", "out.log"), "ignored\n", 0o644) // *.log is ignored
	writeFile(t, filepath.Join(a.Path, "stray.txt"), "stray\n", 0o644)
	gitT(t, a.Path, "init", "--quiet", "nested")
	writeFile(t, filepath.Join(a.Path, "nested", "x.txt"), "x\n", 0o644)
	rec.Verbs()
	if err := c.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "Release", "ls-files", "update-ref", "update-ref", "worktree move")
	assertNotExist(t, a.Path)
	if c.Idle() != 1 {
		t.Fatalf("Idle() = %d after Release, want 1", c.Idle())
	}
	if err := c.Remove(ctx, a); err != nil {
		t.Errorf("Remove after Release: %v", err)
	}
	// Its branch is gone with it: the same attempt can be prepared again
	// (a later epoch, after the report was lost).
	again := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "v1", Branch: a.Branch})
	if err := c.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	rec.Verbs()

	b := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/reuse/b/1"})
	wantVerbs(t, rec, "Prepare from a parked checkout",
		"fetch", "cat-file", "worktree move", "checkout", "clean")
	if c.Idle() != 0 {
		t.Errorf("Idle() = %d after reuse, want 0", c.Idle())
	}
	if b.BaseCommit != o.C2 || b.Baseline != o.C2 {
		t.Errorf("base %s baseline %s, want %s", b.BaseCommit, b.Baseline, o.C2)
	}
	if got := gitT(t, b.Path, "rev-parse", "HEAD"); got != o.C2 {
		t.Errorf("HEAD = %s, want %s", got, o.C2)
	}
	if got := gitT(t, b.Path, "symbolic-ref", "HEAD"); got != "refs/heads/drover/reuse/b/1" {
		t.Errorf("HEAD is %s", got)
	}
	if got := gitT(t, b.Path, "status", "--porcelain", "--ignored", "--untracked-files=all"); got != "" {
		t.Errorf("reused checkout is not clean:\n%s", got)
	}
	if got := readFile(t, filepath.Join(b.Path, "README.md")); got != "hello\n" {
		t.Errorf("README.md = %q", got)
	}
	for _, p := range []string{"new.txt", "stray.txt", "build", "nested"} {
		assertNotExist(t, filepath.Join(b.Path, p))
	}
	rd := repoDir(t, c, o.URL)
	if got := gitT(t, "", "--git-dir="+rd, "for-each-ref", "--format=%(refname)", "refs/heads/"); got != "refs/heads/drover/reuse/b/1" {
		t.Errorf("local branches: %q, want only b's", got)
	}
	ch, err := b.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Created)+len(ch.Modified)+len(ch.Deleted) != 0 || ch.Diff != "" {
		t.Errorf("a fresh attempt on a reused checkout observed changes: %+v", ch)
	}
	// And it works as a worktree: b's own change is committed and pushed.
	writeFile(t, filepath.Join(b.Path, "b.txt"), "b\n", 0o644)
	if ch, err = b.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	assertStrings(t, "b created", ch.Created, []string{"b.txt"})
	sha, err := b.Checkpoint(ctx, "b's work")
	if err != nil {
		t.Fatal(err)
	}
	if pushed, err := b.Push(ctx); err != nil || pushed != sha {
		t.Fatalf("Push = %s, %v", pushed, err)
	}
	if got := o.lsTree(t, "drover/reuse/b/1"); strings.Join(got, " ") != ".gitignore README.md b.txt notes.txt script.sh src/app.go" {
		t.Errorf("b's pushed tree: %v", got)
	}
	if err := c.Remove(ctx, b); err != nil {
		t.Fatal(err)
	}
	assertNotExist(t, b.Path)
}

// What an attempt leaves that a checkout and clean would not undo keeps its
// checkout from being parked: it is removed instead. The admin dir is
// Drover's, but an agent running without the sandbox can write it.
func TestReleaseRemovesWhatCannotBeReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	admin := func(w *Checkout, args ...string) {
		gitT(t, w.Path, append([]string{"--git-dir=" + w.gitDir, "--work-tree=" + w.Path}, args...)...)
	}
	for name, spoil := range map[string]func(w *Checkout){
		"assume-unchanged": func(w *Checkout) { admin(w, "update-index", "--assume-unchanged", "README.md") },
		"skip-worktree":    func(w *Checkout) { admin(w, "update-index", "--skip-worktree", "notes.txt") },
		"merge in progress": func(w *Checkout) {
			writeFile(t, filepath.Join(w.gitDir, "MERGE_HEAD"), o.C3+"\n", 0o644)
		},
		"per-worktree config": func(w *Checkout) {
			writeFile(t, filepath.Join(w.gitDir, "config.worktree"), "[core]\n\tsparseCheckout = true\n", 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestCacheWith(t, testOptions{IdleWorktrees: 2})
			w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/spoil/a/1"})
			spoil(w)
			if err := c.Release(ctx, w); err != nil {
				t.Fatal(err)
			}
			if c.Idle() != 0 {
				t.Errorf("Idle() = %d, want the checkout removed", c.Idle())
			}
			assertNotExist(t, w.Path)
			rd := repoDir(t, c, o.URL)
			if got := gitT(t, "", "--git-dir="+rd, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
				t.Errorf("git still lists worktrees:\n%s", got)
			}
		})
	}
}

// Beyond IdleWorktrees the checkout parked longest ago is removed; DropIdle
// removes the rest; a new cache's sweep removes what an earlier process
// parked.
func TestParkedCheckoutsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	dir := t.TempDir()
	c := newTestCacheWith(t, testOptions{Dir: dir, IdleWorktrees: 2})
	var ws []*Checkout
	for _, b := range []string{"a", "b", "c"} {
		ws = append(ws, prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/bound/" + b + "/1"}))
	}
	for _, w := range ws {
		if err := c.Release(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	rd := repoDir(t, c, o.URL)
	idle := func() int { e, _ := os.ReadDir(filepath.Join(rd, "drover-idle")); return len(e) }
	if c.Idle() != 2 || idle() != 2 {
		t.Fatalf("parked %d (%d on disk), want 2", c.Idle(), idle())
	}
	if got := gitT(t, "", "--git-dir="+rd, "for-each-ref", "--format=%(refname)", "refs/heads/"); got != "" {
		t.Errorf("parked checkouts keep branches: %q", got)
	}

	// Another process on the same cache dir: its sweep removes them.
	c2 := newTestCacheWith(t, testOptions{Dir: dir, IdleWorktrees: 2})
	if _, err := c2.Sweep(ctx, t.TempDir(), func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if idle() != 0 {
		t.Errorf("%d parked checkouts of another process survived its sweep", idle())
	}
	if got := gitT(t, "", "--git-dir="+rd, "for-each-ref", "--format=%(refname)", "refs/heads/"); got != "" {
		t.Errorf("branches left: %q", got)
	}

	// The sweep keeps what this cache parked; DropIdle removes it.
	w := prepare(t, c2, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/bound/d/1"})
	if err := c2.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Sweep(ctx, t.TempDir(), func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if idle() != 1 {
		t.Fatalf("sweep removed this cache's parked checkout (%d on disk)", idle())
	}
	if err := c2.DropIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if c2.Idle() != 0 || idle() != 0 {
		t.Errorf("after DropIdle: %d parked, %d on disk", c2.Idle(), idle())
	}
}

// A checkout parked by an attempt that observed it and prepared again at
// the same commit starts from the baseline it kept, without walking the
// tree. What the last attempt changed is undone by the checkout and is not
// taken for the new attempt's change; what the new attempt changes is
// seen, also where it writes back what the last one wrote or restores a
// file's times; and at another commit the tree is walked as before. Not
// parallel: it counts the package's walks.
func TestReusedCheckoutKeepsItsBaseline(t *testing.T) {
	ctx := context.Background()
	o := newOrigin(t)
	c, _ := newRecordingCacheWith(t, testOptions{IdleWorktrees: 1})
	observe := func(w *Checkout) *Changes {
		t.Helper()
		ch, err := w.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	finish := func(w *Checkout) {
		t.Helper()
		if _, err := w.Checkpoint(ctx, "work"); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	a := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/keep/a/1"})
	writeFile(t, filepath.Join(a.Path, "README.md"), "changed by a\n", 0o644)
	writeFile(t, filepath.Join(a.Path, "a.txt"), "a\n", 0o644)
	writeFile(t, filepath.Join(a.Path, "build", "out.log"), "ignored\n", 0o644)
	if err := os.Remove(filepath.Join(a.Path, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(a.Path, "script.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := observe(a)
	assertStrings(t, "a created", ch.Created, []string{"a.txt", "build/out.log"})
	assertStrings(t, "a modified", ch.Modified, []string{"README.md", "script.sh"})
	assertStrings(t, "a deleted", ch.Deleted, []string{"notes.txt"})
	finish(a)

	walks := snapshotsTaken.Load()
	b := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/keep/b/1"})
	if n := snapshotsTaken.Load() - walks; n != 0 {
		t.Errorf("Prepare of a parked checkout at its baseline walked the tree %d times", n)
	}
	if ch := observe(b); len(ch.Created)+len(ch.Modified)+len(ch.Deleted) != 0 {
		t.Errorf("the last attempt's changes, undone, were observed as this one's: %+v", ch)
	}
	// b writes a's README.md and a.txt again, deletes notes.txt again, and
	// changes app.go keeping its size and times.
	writeFile(t, filepath.Join(b.Path, "README.md"), "changed by a\n", 0o644)
	writeFile(t, filepath.Join(b.Path, "a.txt"), "a\n", 0o644)
	if err := os.Remove(filepath.Join(b.Path, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(b.Path, "src", "app.go")
	info, err := os.Stat(app)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, app, "package mainX\n\nfunc main(){}\n", 0o644) // the same size
	if err := os.Chtimes(app, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	ch = observe(b)
	assertStrings(t, "b created", ch.Created, []string{"a.txt"})
	assertStrings(t, "b modified", ch.Modified, []string{"README.md", "src/app.go"})
	assertStrings(t, "b deleted", ch.Deleted, []string{"notes.txt"})
	finish(b)

	// Parked at main again (b started there), prepared at v1: walked.
	walks = snapshotsTaken.Load()
	v1 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "v1", Branch: "drover/keep/c/1"})
	if n := snapshotsTaken.Load() - walks; n != 1 {
		t.Errorf("Prepare at another commit walked the tree %d times, want 1", n)
	}
	if ch := observe(v1); len(ch.Created)+len(ch.Modified)+len(ch.Deleted) != 0 {
		t.Errorf("a checkout reused at another commit observed changes: %+v", ch)
	}
	writeFile(t, filepath.Join(v1.Path, "notes.txt"), "other notes\n", 0o644)
	ch = observe(v1)
	assertStrings(t, "v1 modified", ch.Modified, []string{"notes.txt"})
	if len(ch.Created)+len(ch.Deleted) != 0 {
		t.Errorf("v1: %+v", ch)
	}
	finish(v1)
}

// An attempt that changed a .gitattributes leaves its checkout unparked:
// under the attributes it wrote, a file it rewrote can be staged as the
// commit's blob, and a checkout of the commit would trust the file's stat
// and leave it as the attempt wrote it for the next attempt to commit.
func TestChangedAttributesAreNotParked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c, _ := newRecordingCacheWith(t, testOptions{IdleWorktrees: 1})
	for _, dir := range []string{"", "src/"} {
		a := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/attrs/a/" + strings.TrimSuffix("1"+dir, "/")})
		writeFile(t, filepath.Join(a.Path, dir+".gitattributes"), "*.txt eol=crlf\n", 0o644)
		writeFile(t, filepath.Join(a.Path, "notes.txt"), "some notes\r\n", 0o644)
		if _, err := a.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Checkpoint(ctx, "attributes"); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if c.Idle() != 0 {
			t.Errorf("%s.gitattributes changed: the checkout was parked", dir)
		}
		b := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/attrs/b/" + strings.TrimSuffix("1"+dir, "/")})
		if got := readFile(t, filepath.Join(b.Path, "notes.txt")); got != "some notes\n" {
			t.Errorf("the next attempt starts with notes.txt = %q", got)
		}
		if err := c.Remove(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
}
