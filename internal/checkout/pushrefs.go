package checkout

import (
	"strings"

	"github.com/drover-dev/drover/internal/repocache"
)

// What a push to a local repository shows of it. Git's push protocol
// (receive-pack, which has no version 2) starts with the remote listing
// every ref it holds, and once the pack is in, the remote checks that
// what was pushed connects to them all (`rev-list --not --all`, then
// again through the quarantine's alternate, the repository itself). A
// flow leaves a result branch per attempt, so late in a flow of 10,000
// tasks each push listed and walked 10,000 branches: a push cost 3-4
// times what it cost at 100 (BenchmarkRefsOnRemote), and a flow's pushes
// together grew as the square of its size.
//
// To a remote Drover reaches over the network the remote's git is the
// host's, and what it lists is its business. To a local path Drover's git
// starts the remote's receive-pack itself, so the push runs it with
// transfer.hideRefs hiding every other result branch: the branches under
// resultsNamespace are hidden but the one pushed and those its commits
// are built on (the base, when it is a result branch, and the results
// merged), which the push's pack needs the remote to show so as not to
// send their objects again. Nothing else changes: the other branches are
// not touched, a branch of the pushed name is shown with its commit, so a
// push over different history is refused as before, and the remote's
// hooks and config apply. A checkout built on more results than
// maxShownResults (an integration build, once per flow) pushes as
// before: naming them all would cost what hiding saves.

// resultsNamespace is where result branches live: drover/<flow>/<task>/<n>
// and each flow's integration branch.
const resultsNamespace = "refs/heads/drover/"

// maxShownResults is the most result branches a push names to be shown.
const maxShownResults = 64

// shownResults is the result branches a push of branch must show, for a
// checkout at base with merge merged; ok is false when the push should
// show everything.
func shownResults(branch, base string, merge []repocache.Ref) (refs []string, ok bool) {
	names := []string{"refs/heads/" + branch}
	switch {
	case strings.HasPrefix(base, "refs/heads/"):
		names = append(names, base)
	case base != "":
		names = append(names, "refs/heads/"+base) // a branch, a tag or a commit: shown if a result branch
	}
	for _, m := range merge {
		names = append(names, "refs/heads/"+m.Branch)
	}
	for _, n := range names {
		if strings.HasPrefix(n, resultsNamespace) {
			refs = append(refs, n)
		}
	}
	return refs, len(refs) <= maxShownResults+1
}

// receivePackArgs is what a push to the checkout's repository adds for
// the remote's receive-pack to show only what it must: nothing for a
// remote that is not a local path.
func (w *Checkout) receivePackArgs() []string {
	if !w.hideResults {
		return nil
	}
	if _, ok := repocache.LocalPath(w.repo.URL()); !ok {
		return nil
	}
	cmd := []string{w.cs.git.Binary(), "-c", "transfer.hideRefs=" + resultsNamespace}
	for _, r := range w.shownResults {
		cmd = append(cmd, "-c", "transfer.hideRefs=!"+r)
	}
	// In the quarantine the pushed objects wait in, the repository's own
	// objects are an alternate, whose refs the connectivity check lists
	// too: all of them, hidden or not. Those it must not rely on are
	// listed already; the alternates' refs add nothing but the walk.
	cmd = append(cmd, "-c", "core.alternateRefsCommand=true", "receive-pack")
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		quoted[i] = shellQuote(a)
	}
	return []string{"--receive-pack=" + strings.Join(quoted, " ")}
}

// shellQuote quotes s for sh, which runs the --receive-pack command.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
