package repocache

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/internal/git/gittest"
)

// TestCloneLeavesResultsOnTheRemote: a clone fetches every branch and tag
// but the result branches a remote that served flows holds by the
// thousand; a Prepare that merges a result, or is based on one, fetches
// it by name; and a result that moved on the remote since is resolved
// where it is now.
func TestCloneLeavesResultsOnTheRemote(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	var results []string
	for _, b := range []string{"drover/f/a/1", "drover/f/b/1", "drover/g/c/1"} {
		gittest.Run(t, o.Seed, "branch", b, gittest.MainBranch)
		results = append(results, o.PushNew(t, b, "out.txt", b+"\n"))
	}
	c, rec := newRecordingCache(t)
	res := resolve(t, c, Request{URL: o.URL, Base: gittest.MainBranch, Branch: "drover/f/x/1"})
	if res.Base != o.C2 {
		t.Errorf("Base = %s, want main %s", res.Base, o.C2)
	}
	// The clone's one fetch covers main: no second one (git is asked its
	// version once, for negative refspecs).
	gittest.WantVerbs(t, rec, "clone", "version", "init", "remote", "fetch", "remote", "cat-file")
	refs := func() string {
		return gittest.Run(t, "", "--git-dir="+res.Repo.Dir(), "for-each-ref", "--format=%(refname)")
	}
	if got, want := refs(), "refs/remotes/origin/HEAD\nrefs/remotes/origin/feature\nrefs/remotes/origin/main\nrefs/tags/light\nrefs/tags/v1"; got != want {
		t.Errorf("the clone's refs:\n%s\nwant\n%s", got, want)
	}
	for _, sha := range results {
		if _, err := gittest.Try("", "--git-dir="+res.Repo.Dir(), "cat-file", "-e", sha); err == nil {
			t.Errorf("the clone fetched result %s", sha)
		}
	}

	// On a result, merging another, which moved on the remote since.
	moved := o.PushNew(t, "drover/f/b/1", "more.txt", "more\n")
	res, err := c.Resolve(context.Background(), Request{URL: o.URL, Base: "drover/f/a/1", Branch: "drover/f/y/1",
		Merge: []Ref{{Branch: "drover/f/b/1"}}})
	if err != nil {
		t.Fatal(err)
	}
	res.Repo.Unlock()
	if res.Base != results[0] || len(res.Merge) != 1 || res.Merge[0] != moved {
		t.Errorf("resolved base %s, merge %q; want %s and %s", res.Base, res.Merge, results[0], moved)
	}
}
