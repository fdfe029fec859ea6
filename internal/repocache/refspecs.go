package repocache

import (
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// A Resolve fetches what it needs — its base and the results it merges —
// rather than every branch of the remote. Drover pushes a branch for every
// attempt, so a remote that served thousands of attempts has thousands of
// branches, and a fetch of all of them costs time in their number on both
// sides (2,000 loose refs: 0.25 s; one branch: 0.02 s), before every
// attempt. Each wanted name is fetched as a pattern ending in "*", which
// matches the name itself and does not fail when the remote lacks it: the
// resolution after the fetch then reports the missing revision as before.

// maxMergeRefspecs is how many results a Resolve fetches one by one; an
// integration build of a large flow fetches its flow's results by their
// common prefix (drover/<flow>/*) instead, and one merging the results of
// several flows every branch. Not every branch for one flow: a remote
// keeps the result branches of every flow it served, and a fetch of them
// all wrote as many refs in the cache.
const maxMergeRefspecs = 64

// refspecs is what one fetch asks for.
type refspecs struct {
	all           bool     // every branch and tag (fetchRefspecs)
	allButResults bool     // every branch but the results, every tag (a clone's, cloneRefspecs)
	headOfRemote  bool     // the remote's default branch, known from origin/HEAD
	specs         []string // sorted
}

// everything is a fetch of fetchRefspecs.
var everything = refspecs{all: true}

// wantedRefspecs is what a Resolve of base merging merge needs fetched.
// A name that is not plain (see git.PlainBranch) fetches everything, as every
// fetch did before, so that what git makes of it stays git's business.
func wantedRefspecs(base string, merge []Ref) refspecs {
	var w refspecs
	var names []string
	if len(merge) > maxMergeRefspecs {
		prefix, ok := sharedResultPrefix(merge)
		if !ok {
			return everything
		}
		names = append(names, strings.TrimSuffix(prefix, "/"))
		w.specs = append(w.specs, branchRefspec(prefix))
		merge = nil
	}
	switch {
	case base == "" || base == "HEAD":
		w.headOfRemote = true
	case strings.HasPrefix(base, "refs/heads/"):
		names = append(names, strings.TrimPrefix(base, "refs/heads/"))
		w.specs = append(w.specs, branchRefspec(names[0]))
	case strings.HasPrefix(base, "refs/tags/"):
		names = append(names, strings.TrimPrefix(base, "refs/tags/"))
		w.specs = append(w.specs, tagRefspec(names[0]))
	default: // a branch, a tag or a commit
		names = append(names, base)
		w.specs = append(w.specs, branchRefspec(base), tagRefspec(base))
	}
	for _, m := range merge {
		names = append(names, m.Branch)
		w.specs = append(w.specs, branchRefspec(m.Branch))
	}
	for _, n := range names {
		if !git.PlainBranch(n) {
			return everything
		}
	}
	w.sort()
	return w
}

// sharedResultPrefix is the longest prefix of every merged branch's name
// that ends with a slash, when it names a flow's results (drover/<flow>/
// or deeper).
func sharedResultPrefix(merge []Ref) (string, bool) {
	prefix := merge[0].Branch
	for _, m := range merge[1:] {
		n := 0
		for n < len(prefix) && n < len(m.Branch) && prefix[n] == m.Branch[n] {
			n++
		}
		prefix = prefix[:n]
	}
	prefix = prefix[:strings.LastIndexByte(prefix, '/')+1]
	flow, _, _ := strings.Cut(strings.TrimPrefix(prefix, "drover/"), "/")
	return prefix, strings.HasPrefix(prefix, "drover/") && flow != ""
}

func (w *refspecs) sort() {
	slices.Sort(w.specs)
	w.specs = slices.Compact(w.specs)
}

func branchRefspec(name string) string {
	return "+refs/heads/" + name + "*:refs/remotes/origin/" + name + "*"
}

// isResultSpec reports whether a refspec of branchRefspec's fetches result
// branches.
func isResultSpec(s string) bool { return strings.HasPrefix(s, "+"+resultBranches) }

func tagRefspec(name string) string { return "+refs/tags/" + name + "*:refs/tags/" + name + "*" }

// list is the refspecs to pass to git fetch.
func (w refspecs) list() []string {
	if w.all {
		return fetchRefspecs
	}
	return w.specs
}

// covers reports whether a fetch of w brought everything want asks for.
func (w refspecs) covers(want refspecs) bool {
	switch {
	case w.all:
		return true
	case w.allButResults:
		return !want.all && !slices.ContainsFunc(want.specs, isResultSpec)
	case want.all, want.headOfRemote && !w.headOfRemote:
		return false
	}
	for _, s := range want.specs {
		if _, ok := slices.BinarySearch(w.specs, s); !ok {
			return false
		}
	}
	return true
}
