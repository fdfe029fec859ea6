package checkout

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"
	"github.com/drover-dev/drover/internal/repocache"
)

// pushResult makes a result branch on the origin: a commit of its own on
// main adding file.
func (o *origin) pushResult(t testing.TB, branch, file string) string {
	t.Helper()
	gitT(t, o.Seed, "branch", branch, mainBranch)
	return o.pushNew(t, branch, file, branch+"\n")
}

// advertisedRefs is the refs a push's remote listed to it, from git's
// packet trace (GIT_TRACE_PACKET), and clears the trace.
func advertisedRefs(t testing.TB, trace string) []string {
	t.Helper()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(trace); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, m := range regexp.MustCompile(`push< [0-9a-f]{40} (refs/[^\s\\]+)`).FindAllStringSubmatch(string(b), -1) {
		refs = append(refs, m[1])
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

// TestPushToLocalShowsOnlyItsResults: a push to a local repository is
// shown the branches that are not results, and of the results only the
// one it pushes and those it is built on (its base and what it merged),
// whatever other results the repository holds; to a remote Drover does
// not run the receive-pack of (here ssh), everything, as before. The
// results land the same either way.
func TestPushToLocalShowsOnlyItsResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	base := o.pushResult(t, "drover/f/base/1", "base.txt")
	dep := o.pushResult(t, "drover/f/dep/1", "dep.txt")
	o.pushResult(t, "drover/f/other/1", "other.txt")
	o.pushResult(t, "drover/g/elsewhere/1", "elsewhere.txt")
	trace := filepath.Join(t.TempDir(), "packets")

	for _, tc := range []struct {
		via, url string
		env      []string
		want     []string
	}{
		{"local", o.URL, nil, []string{
			"refs/heads/drover/f/base/1", "refs/heads/drover/f/dep/1", "refs/heads/feature", "refs/heads/main",
			"refs/tags/light", "refs/tags/v1"}},
		{"ssh", "ssh://host.invalid" + o.URL, []string{"GIT_SSH_COMMAND=" + fakeSSH(t)}, []string{
			"refs/heads/drover/f/base/1", "refs/heads/drover/f/dep/1", "refs/heads/drover/f/other/1",
			"refs/heads/drover/f/task-local/1", "refs/heads/drover/g/elsewhere/1", "refs/heads/feature", "refs/heads/main",
			"refs/tags/light", "refs/tags/v1"}},
	} {
		c := newTestCacheWith(t, testOptions{Env: append(tc.env, "GIT_TRACE_PACKET="+trace)})
		branch := "drover/f/task-" + tc.via + "/1"
		w := prepare(t, c, PrepareOptions{RepoURL: tc.url, Base: "drover/f/base/1", Branch: branch,
			Merge: []repocache.Ref{{Branch: "drover/f/dep/1", Commit: dep}}})
		writeFile(t, filepath.Join(w.Path, "out.txt"), tc.via+"\n", 0o644)
		sha, err := w.Checkpoint(ctx, "done")
		if err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(trace) // Prepare's fetch
		if pushed, err := w.Push(ctx); err != nil || pushed != sha {
			t.Fatalf("%s: Push = %s, %v; want %s", tc.via, pushed, err, sha)
		}
		assertStrings(t, tc.via+": refs shown to the push", advertisedRefs(t, trace), tc.want)
		if got := o.git(t, "rev-parse", "refs/heads/"+branch); got != sha {
			t.Errorf("%s: origin's branch at %s, want %s", tc.via, got, sha)
		}
		// The pushed commit is complete on the origin, built on both.
		o.git(t, "fsck", "--no-dangling", "--connectivity-only")
		if got := o.git(t, "rev-list", "--count", sha, "^"+base, "^"+dep); got != "2" { // the merge and the checkpoint
			t.Errorf("%s: %s commits past the base and the result, want 2", tc.via, got)
		}
		// Pushed again, the branch is shown with its commit: nothing to do.
		if again, err := w.Push(ctx); err != nil || again != sha {
			t.Errorf("%s: second Push = %s, %v", tc.via, again, err)
		}
		if err := c.Remove(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPushToLocalRefusedAsBefore: hiding results changes nothing a push
// is refused for. A branch of the same name left by an earlier attempt,
// with other history, is shown and refuses the push; a push that races
// another to the branch loses; the remote's hook still decides; and a
// base that moved on the remote since Prepare does not matter.
func TestPushToLocalRefusedAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	o.pushResult(t, "drover/f/other/1", "other.txt")
	c := newTestCache(t)
	attempt := func(branch string) *Checkout {
		t.Helper()
		w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: branch})
		writeFile(t, filepath.Join(w.Path, "out.txt"), branch+"\n", 0o644)
		if _, err := w.Checkpoint(ctx, "done"); err != nil {
			t.Fatal(err)
		}
		return w
	}
	hook := func(script string) {
		t.Helper()
		p := filepath.Join(o.URL, "hooks", "pre-receive")
		if script == "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := exectest.WriteExecutable(p, []byte("#!/bin/sh\n"+script)); err != nil {
			t.Fatal(err)
		}
	}

	// An earlier attempt's branch of the same name.
	earlier := o.pushResult(t, "drover/f/same/1", "earlier.txt")
	w := attempt("drover/f/same/1")
	if _, err := w.Push(ctx); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("push over an earlier attempt's branch: %v, want git's rejection", err)
	}
	if got := o.git(t, "rev-parse", "refs/heads/drover/f/same/1"); got != earlier {
		t.Errorf("the earlier branch moved to %s", got)
	}

	// Another push lands on the branch after the remote listed its refs
	// and before it updates them.
	hook(`[ -n "$GIT_QUARANTINE_PATH" ] || exit 0
env -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES git update-ref refs/heads/drover/f/race/1 ` + o.C3 + "\n")
	w = attempt("drover/f/race/1")
	if _, err := w.Push(ctx); err == nil {
		t.Error("a push that lost the race to its branch succeeded")
	}
	if got := o.git(t, "rev-parse", "refs/heads/drover/f/race/1"); got != o.C3 {
		t.Errorf("the raced branch is at %s, want the other push's %s", got, o.C3)
	}

	// The remote's hook refuses.
	hook("echo no pushes today >&2; exit 1\n")
	w = attempt("drover/f/hooked/1")
	if _, err := w.Push(ctx); err == nil || !strings.Contains(err.Error(), "no pushes today") {
		t.Errorf("push refused by the remote's hook: %v, want the hook's words", err)
	}
	if _, err := gitE("", "--git-dir="+o.URL, "rev-parse", "--verify", "--quiet", "refs/heads/drover/f/hooked/1"); err == nil {
		t.Error("the refused branch exists on the remote")
	}
	hook("")

	// The base moved on the remote after Prepare.
	w = attempt("drover/f/moved/1")
	moved := o.pushNew(t, mainBranch, "later.txt", "later\n")
	sha, err := w.Push(ctx)
	if err != nil {
		t.Fatalf("push after the base moved: %v", err)
	}
	if got := o.git(t, "rev-parse", sha+"^"); got != o.C2 || got == moved {
		t.Errorf("pushed commit's parent %s, want the base it was built on, %s", got, o.C2)
	}
	o.git(t, "fsck", "--no-dangling", "--connectivity-only")
}

func TestShownResults(t *testing.T) {
	t.Parallel()
	refs, ok := shownResults("drover/f/t/1", "main", nil)
	assertStrings(t, "a result on main", refs, []string{"refs/heads/drover/f/t/1"})
	if !ok {
		t.Error("a result on main shows everything")
	}
	refs, _ = shownResults("drover/f/t/1", "refs/heads/drover/f/base/1", []repocache.Ref{{Branch: "drover/f/a/1"}})
	assertStrings(t, "on a result, merging one", refs, []string{"refs/heads/drover/f/t/1", "refs/heads/drover/f/base/1", "refs/heads/drover/f/a/1"})
	refs, _ = shownResults("release", "v1.0", nil)
	assertStrings(t, "outside the results", refs, nil)
	many := make([]repocache.Ref, maxShownResults+1)
	for i := range many {
		many[i].Branch = "drover/f/t" + strings.Repeat("x", i) + "/1"
	}
	if _, ok := shownResults("drover/f/integration", "main", many); ok {
		t.Errorf("a push merging %d results hides the others", len(many))
	}
	if _, ok := shownResults("drover/f/integration", "main", many[1:]); !ok {
		t.Errorf("a push merging %d results shows everything", len(many)-1)
	}
}
