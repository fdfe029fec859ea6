package repocache

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// resolveBaseAndBranch, one cat-file where it can, answers what resolveBase
// and resolveCommit answer one rev-parse at a time.
func TestResolveBaseAndBranchAgreesWithRevParse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	// The attempt branch a/1 exists, as a checkout's would; b/1 does not.
	res := resolve(t, c, Request{URL: o.URL, Base: mainBranch, Branch: "drover/resolve/a/1"})
	gitT(t, "", "--git-dir="+res.Repo.Dir(), "update-ref", "refs/heads/drover/resolve/a/1", res.Base)
	r := lockedRepo(t, c, o.URL)
	defer r.Unlock()
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
	_, err = c.Resolve(context.Background(), Request{URL: o.URL, Base: mainBranch, Branch: "drover/c/1"})
	if !errors.Is(err, ErrCacheCorrupt) {
		t.Fatalf("err = %v, want ErrCacheCorrupt", err)
	}
}
