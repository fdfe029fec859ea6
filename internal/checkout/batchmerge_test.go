package checkout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/git/gittest"
	"github.com/drover-dev/drover/internal/repocache"
)

// mergeTwice prepares a worktree merging refs twice, once trying
// batchMerges first and once with git merging each, and fails the test
// unless both give the same tree and merge commits (parents, message,
// author) or the same conflict. It returns how many results git merged in
// the batched run, and whether the batch ran and the merge conflicted.
type mergeTwice struct {
	o                 *origin
	batched, oneByOne *Checkouts
	rec               *gittest.Recorder
}

func newMergeTwice(t *testing.T, o *origin) *mergeTwice {
	m := &mergeTwice{o: o, oneByOne: newTestCacheWith(t, testOptions{BatchMerges: -1})}
	m.batched, m.rec = newRecordingCacheWith(t, testOptions{BatchMerges: 1})
	return m
}

func (m *mergeTwice) compare(t *testing.T, into string, refs []repocache.Ref) (byGit int, batched, conflict bool) {
	t.Helper()
	ctx := context.Background()
	m.rec.Verbs()
	got, gotErr := m.batched.Prepare(ctx, PrepareOptions{RepoURL: m.o.URL, Base: mainBranch, Branch: into, Path: wtPath(t), Merge: refs})
	verbs := m.rec.Verbs()
	for _, v := range verbs {
		if v == "merge-tree" {
			byGit++
		}
	}
	batched = slices.Contains(verbs, "fast-import")
	want, wantErr := m.oneByOne.Prepare(ctx, PrepareOptions{RepoURL: m.o.URL, Base: mainBranch, Branch: into, Path: wtPath(t), Merge: refs})
	var gotC, wantC *MergeConflictError
	switch {
	case errors.As(wantErr, &wantC):
		// git names a file it moves aside after the commit merged into
		// (path~<sha>), and the merge commits' hashes differ.
		if !errors.As(gotErr, &gotC) || gotC.Branch != wantC.Branch || !slices.Equal(sidesNamed(gotC.Paths), sidesNamed(wantC.Paths)) {
			t.Fatalf("%s: batched merge gave %v, git %v", into, gotErr, wantErr)
		}
		return byGit, batched, true
	case wantErr != nil || gotErr != nil:
		t.Fatalf("%s: batched merge gave %v, git %v", into, gotErr, wantErr)
	}
	if g, w := gitT(t, got.Path, "ls-tree", "-r", "HEAD"), gitT(t, want.Path, "ls-tree", "-r", "HEAD"); g != w {
		t.Errorf("%s: batched merge tree\n%s\ngit's\n%s", into, g, w)
	}
	// The merge commits' own hashes differ with their times.
	log := []string{"log", "--first-parent", "--date=format:%z", "--format=%s|%an <%ae> %ad|%cn <%ce> %cd|%P", got.BaseCommit + "..HEAD"}
	mergedResults := func(dir string) string {
		var lines []string
		for l := range strings.Lines(gitT(t, dir, log...)) {
			i := strings.LastIndexByte(l, '|')
			lines = append(lines, l[:i]+" "+strings.Join(strings.Fields(l[i+1:])[1:], " "))
		}
		return strings.Join(lines, "\n")
	}
	if g, w := mergedResults(got.Path), mergedResults(want.Path); g != w {
		t.Errorf("%s: batched merge commits\n%s\ngit's\n%s", into, g, w)
	}
	if st := gitT(t, got.Path, "status", "--porcelain", "--ignored"); st != "" {
		t.Errorf("%s: worktree not at the merges after batching:\n%s", into, st)
	}
	return byGit, batched, false
}

var sideSuffix = regexp.MustCompile(`~[0-9a-f]{40}$`)

func sidesNamed(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, sideSuffix.ReplaceAllString(p, "~side"))
	}
	return out
}

// result commits changes on a new branch from `from` in the origin's seed
// and pushes it: change runs in the seed's checkout before each commit.
func (o *origin) result(t *testing.T, branch, from string, commits int, change func()) repocache.Ref {
	t.Helper()
	gitT(t, o.Seed, "checkout", "--quiet", "--force", "-B", branch, from)
	gitT(t, o.Seed, "clean", "-fdxq")
	for range commits {
		change()
		gitT(t, o.Seed, "add", "-A")
		gitT(t, o.Seed, "commit", "--quiet", "--allow-empty", "-m", "change")
	}
	gitT(t, o.Seed, "push", "--quiet", "origin", branch)
	ref := repocache.Ref{Branch: branch, Commit: gitT(t, o.Seed, "rev-parse", "HEAD")}
	gitT(t, o.Seed, "checkout", "--quiet", "--force", mainBranch)
	gitT(t, o.Seed, "clean", "-fdxq")
	return ref
}

// originWithDirs is newOrigin with a few directories on main.
func originWithDirs(t *testing.T) *origin {
	o := newOrigin(t)
	for _, f := range []string{"d1/a", "d1/b", "d2/c", "d2/sub/e"} {
		writeFile(t, filepath.Join(o.Seed, f), "base "+f+"\n", 0o644)
	}
	o.commit(t, "dirs")
	gitT(t, o.Seed, "push", "--quiet", "origin", mainBranch)
	return o
}

// TestBatchedMergesAreGitsMerges merges random sets of results both ways
// (mergeTwice). The results change, add, delete, rename and chmod files,
// turn files into directories, move a whole directory, build on each
// other or on an older commit than the base, often on the same paths, so
// both the batch and the point where it must hand over to git are
// exercised.
func TestBatchedMergesAreGitsMerges(t *testing.T) {
	t.Parallel()
	o := originWithDirs(t)
	m := newMergeTwice(t, o)
	rng := rand.New(rand.NewPCG(8, 24))
	var used, conflicts, partial, results, byGit int
	for round := range 30 {
		var refs []repocache.Ref
		for k := range 2 + rng.IntN(5) {
			branch := fmt.Sprintf("drover/diff/r%d-%d/1", round, k)
			from := mainBranch
			switch rng.IntN(10) {
			case 0, 1:
				if k > 0 {
					from = refs[rng.IntN(len(refs))].Branch // a dependent task's result
				}
			case 2:
				from = mainBranch + "~1" // the base moved since the task ran
			}
			refs = append(refs, o.result(t, branch, from, 1+rng.IntN(2), func() {
				for range 1 + rng.IntN(3) {
					randomChange(t, rng, o.Seed, branch)
				}
			}))
		}
		n, batched, conflict := m.compare(t, fmt.Sprintf("drover/diff/m%d/1", round), refs)
		results, byGit = results+len(refs), byGit+n
		if batched {
			used++
			if n > 0 {
				partial++
			}
		}
		if conflict {
			conflicts++
		}
	}
	t.Logf("30 rounds: batch used in %d (%d handing over to git), %d conflicts; %d of %d results merged by git",
		used, partial, conflicts, byGit, results)
	if used < 5 || partial < 3 || conflicts < 3 || byGit > results/2 {
		t.Errorf("the random results exercise too little: batch used %d, partly %d, conflicts %d, %d of %d merged by git",
			used, partial, conflicts, byGit, results)
	}
}

// TestBatchedMergesHandOver covers, one by one, the results the batch must
// leave to git, each of which a batch would merge wrongly, and identical
// changes, which it merges.
func TestBatchedMergesHandOver(t *testing.T) {
	t.Parallel()
	o := originWithDirs(t)
	m := newMergeTwice(t, o)
	write := func(p, content string) func() {
		return func() { writeFile(t, filepath.Join(o.Seed, p), content, 0o644) }
	}
	move := func(from, to string) func() {
		return func() { _ = os.Rename(filepath.Join(o.Seed, from), filepath.Join(o.Seed, to)) }
	}
	// onMain is two results on main, a's then b's change.
	onMain := func(n string, a, b func()) []repocache.Ref {
		return []repocache.Ref{
			o.result(t, "drover/"+n+"/a/1", mainBranch, 1, a),
			o.result(t, "drover/"+n+"/b/1", mainBranch, 1, b),
		}
	}
	for _, tc := range []struct {
		name  string
		refs  func(name string) []repocache.Ref
		byGit int // of the results after the first, merged by git
	}{
		{"the same file added by each", func(n string) []repocache.Ref {
			return onMain(n, write("same.txt", "same\n"), write("same.txt", "same\n"))
		}, 0},
		{"the same file added, once by a rename", func(n string) []repocache.Ref {
			return onMain(n, write("h.txt", "some notes\n"), move("notes.txt", "h.txt"))
		}, 1},
		{"a file added differently", func(n string) []repocache.Ref {
			return onMain(n, write("diff.txt", "one\n"), write("diff.txt", "two\n"))
		}, 1},
		{"a file where a directory was added", func(n string) []repocache.Ref {
			return onMain(n, write("n/x", "x\n"), write("n", "n\n"))
		}, 1},
		{"a directory where a file was added", func(n string) []repocache.Ref {
			return onMain(n, write("m", "m\n"), write("m/x", "x\n"))
		}, 1},
		{"a result on an older base", func(n string) []repocache.Ref {
			return []repocache.Ref{
				o.result(t, "drover/"+n+"/a/1", mainBranch, 1, write("a.txt", "a\n")),
				o.result(t, "drover/"+n+"/b/1", mainBranch+"~1", 1, write("b.txt", "b\n")),
			}
		}, 1},
		{"a dependent result undoing its dependency", func(n string) []repocache.Ref {
			a := o.result(t, "drover/"+n+"/a/1", mainBranch, 1, write("f.txt", "f\n"))
			b := o.result(t, "drover/"+n+"/b/1", a.Branch, 1, func() {
				_ = os.Remove(filepath.Join(o.Seed, "f.txt"))
				writeFile(t, filepath.Join(o.Seed, "g.txt"), "g\n", 0o644)
			})
			return []repocache.Ref{a, b}
		}, 1},
		{"a directory moved, a file added to it", func(n string) []repocache.Ref {
			return onMain(n, move("d1", "d9"), write("d1/new", "new\n"))
		}, 1},
		{"a file added to a directory, the directory moved", func(n string) []repocache.Ref {
			return onMain(n, write("d2/new", "new\n"), move("d2", "d8"))
		}, 1},
	} {
		name := strings.ReplaceAll(tc.name, " ", "-")
		// An independent result first, so the batch has one to merge
		// before it must hand over.
		own := o.result(t, "drover/"+name+"/own/1", mainBranch, 1, write("own-"+name, "own\n"))
		byGit, batched, _ := m.compare(t, "drover/"+name+"/merged/1", append([]repocache.Ref{own}, tc.refs(name)...))
		if !batched || byGit != tc.byGit {
			t.Errorf("%s: batch used %v, %d results merged by git; want the first batched and %d left to git", tc.name, batched, byGit, tc.byGit)
		}
	}
}

// randomChange makes one change of the kinds results make: half the time
// a file of the result's own (named after own), otherwise on a small set of
// paths so that results collide often.
func randomChange(t *testing.T, rng *rand.Rand, dir, own string) {
	t.Helper()
	if rng.IntN(2) == 0 {
		p := []string{"own", "d1", "d2/sub", "src"}[rng.IntN(4)] + "/" + strings.ReplaceAll(own, "/", "-")
		writeFile(t, filepath.Join(dir, p), "own\n", 0o644)
		return
	}
	paths := []string{"README.md", "notes.txt", "script.sh", "src/app.go", "d1/a", "d1/b", "d2/c", "d2/sub/e",
		"new.txt", "d1/new", "d3/new", "src/new.go", "d2/sub/new"}
	p := paths[rng.IntN(len(paths))]
	full := filepath.Join(dir, p)
	switch rng.IntN(8) {
	case 0, 1: // write, from a few contents, so equal changes happen too
		if info, err := os.Lstat(full); err == nil && !info.Mode().IsRegular() {
			_ = os.RemoveAll(full)
		}
		writeFile(t, full, fmt.Sprintf("content %d\n", rng.IntN(3)), 0o644)
	case 2:
		_ = os.Remove(full)
	case 3: // rename
		if _, err := os.Stat(full); err == nil {
			to := filepath.Join(dir, paths[rng.IntN(len(paths))])
			if _, err := os.Stat(to); err != nil && os.MkdirAll(filepath.Dir(to), 0o755) == nil {
				_ = os.Rename(full, to)
			}
		}
	case 4:
		if _, err := os.Stat(full); err == nil {
			_ = os.Chmod(full, 0o755)
		}
	case 5: // a file becomes a directory
		_ = os.RemoveAll(full)
		writeFile(t, filepath.Join(full, "inner"), "inner\n", 0o644)
	case 6: // a whole directory moves
		src := []string{"d1", "d2", "src"}[rng.IntN(3)]
		if _, err := os.Stat(filepath.Join(dir, src)); err == nil {
			_ = os.Rename(filepath.Join(dir, src), filepath.Join(dir, "moved-"+src))
		}
	case 7:
		_ = os.RemoveAll(full)
		if os.MkdirAll(filepath.Dir(full), 0o755) == nil {
			_ = os.Symlink("elsewhere", full)
		}
	}
}
