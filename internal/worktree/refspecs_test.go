package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareFetchesWhatItNeeds: after the clone, a Prepare fetches its
// base and the results it merges, not the remote's other branches (a remote
// holds one per attempt Drover ever ran), and still sees every move of what
// it asked for.
func TestPrepareFetchesWhatItNeeds(t *testing.T) {
	o := newOrigin(t)
	c := newTestCache(t)
	prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/a/1"})

	results := map[string]string{}
	for _, b := range []string{"drover/f/x/1", "drover/f/y/1", "drover/f/z/1"} {
		gitT(t, o.Seed, "branch", b, mainBranch)
		results[b] = o.pushNew(t, b, strings.ReplaceAll(b, "/", "-")+".txt", b+"\n")
	}
	main := o.pushNew(t, mainBranch, "later.txt", "later\n")
	r, err := c.repoFor(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	remoteRefs := func() string {
		return gitT(t, "", "--git-dir="+r.dir, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/drover/")
	}

	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/b/1"})
	if w.BaseCommit != main {
		t.Errorf("base %s, want main's new commit %s", w.BaseCommit, main)
	}
	if got := remoteRefs(); got != "" {
		t.Errorf("a Prepare without merges fetched result branches:\n%s", got)
	}

	w = prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: "HEAD", Branch: "drover/f/c/1",
		Merge: []Ref{{Branch: "drover/f/y/1", Commit: results["drover/f/y/1"]}}})
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
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: "nope", Branch: "drover/f/d/1", Path: wtPath(t)})
	var nf *RevisionNotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Prepare at a base the remote lacks: %v, want a RevisionNotFoundError", err)
	}
	_, err = c.Prepare(context.Background(), PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/f/e/1", Path: wtPath(t),
		Merge: []Ref{{Branch: "drover/f/gone/1"}}})
	if !errors.As(err, &nf) {
		t.Errorf("Prepare merging a branch the remote lacks: %v, want a RevisionNotFoundError", err)
	}
}

func TestWantedRefspecs(t *testing.T) {
	main := wantedRefspecs("main", nil)
	if got := strings.Join(main.list(), " "); got != "+refs/heads/main*:refs/remotes/origin/main* +refs/tags/main*:refs/tags/main*" {
		t.Errorf("base main: %s", got)
	}
	merging := wantedRefspecs("main", []Ref{{Branch: "drover/f/a/1"}})
	head := wantedRefspecs("HEAD", nil)
	for _, tt := range []struct {
		name         string
		fetched, got refspecs
		covers       bool
	}{
		{"same", main, main, true},
		{"more", merging, main, true},
		{"less", main, merging, false},
		{"everything covers all", everything, merging, true},
		{"nothing covers everything", merging, everything, false},
		{"the remote's HEAD only if fetched", main, head, false},
	} {
		if got := tt.fetched.covers(tt.got); got != tt.covers {
			t.Errorf("%s: covers = %v", tt.name, got)
		}
	}
	if !wantedRefspecs("main", make([]Ref, maxMergeRefspecs+1)).all {
		t.Error("an integration of many results fetches one branch at a time")
	}
	for _, base := range []string{"@{-1}", "a..b", "x:y", "refs/heads/a b"} {
		if !wantedRefspecs(base, nil).all {
			t.Errorf("base %q: not a plain name, want everything fetched as before", base)
		}
	}
}
