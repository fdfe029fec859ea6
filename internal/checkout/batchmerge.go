package checkout

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// Batched merges. An integration build merges every result of a flow, one
// `git merge-tree` and one `git commit-tree` each: 200 results are 400 git
// processes, 2.4 s of the end-to-end benchmark. Most results are
// independent tasks' commits on the flow's base that change paths no other
// result changes, and merging such a result is taking its changes: git's
// three-way merge of trees that differ from their merge base at disjoint
// paths is the union of the differences. batchMerges proves that for the
// leading results and writes their merge commits in one `git fast-import`,
// three git processes in all; the first result it cannot prove, and every
// one after it, is merged by git as before, so whatever could conflict or
// need git's rename handling still gets it.
//
// What the proof requires of a result R merged into head H (the first is
// the base B itself, then each merge made here):
//   - R's own commits (those not reachable from B) all descend from B and
//     from nothing else outside them, and no other result merged before
//     has any of them: then B is the merge base of H and R, and R's changes
//     are diff(B, R);
//   - every path R changes is one no earlier result changed, or changed
//     the same way while no result deleted anything (git takes identical
//     changes on both sides as merged; a deletion could make either a
//     rename), and is neither the parent directory of a changed path nor
//     inside one (a file and a directory of the same name conflict);
//   - no directory R deletes from was added to by an earlier result and no
//     directory R adds to lost a file to one: git's directory rename
//     detection could move the added file, or report a conflict;
//   - its paths can be written unquoted in a fast-import stream (no line
//     feed, no leading double quote).

// minBatchMerges is the fewest merges worth a batch unless
// CacheOptions.BatchMerges says otherwise: the batch costs three git
// processes, a merge on its own two.
const minBatchMerges = 3

// pendingMerge is a result to merge: its branch, for the message, and sha.
type pendingMerge struct{ branch, sha string }

// batchMerges merges the leading results of merges it can prove clean (see
// above) into head, base of every result, and returns the last merge
// commit and how many results it merged (0: nothing provable, head
// unchanged). It moves the worktree's branch but not its index or files.
func (w *Checkout) batchMerges(ctx context.Context, head string, merges []pendingMerge) (string, int, error) {
	name, email := w.cs.git.Identity()
	if strings.ContainsAny(name+email, "<>\n") {
		return head, 0, nil // cannot be written in a fast-import stream
	}
	n, err := w.independentResults(ctx, head, merges)
	if err != nil || n == 0 {
		return head, 0, err
	}
	changes, err := w.resultChanges(ctx, head, merges[:n])
	if err != nil {
		return head, 0, err
	}
	n = disjointPrefix(changes)
	if n == 0 {
		return head, 0, nil
	}

	var in bytes.Buffer
	in.WriteString("feature done\n")
	for i, m := range merges[:n] {
		msg := fmt.Sprintf("Merge %s (%s) into %s\n", m.branch, git.ShortID(m.sha), w.Branch)
		fmt.Fprintf(&in, "commit refs/heads/%s\nmark :%d\ncommitter %s <%s> now\ndata %d\n%s", w.Branch, i+1, name, email, len(msg), msg)
		if i == 0 {
			fmt.Fprintf(&in, "from %s\n", head)
		} else {
			fmt.Fprintf(&in, "from :%d\n", i)
		}
		fmt.Fprintf(&in, "merge %s\n", m.sha)
		for _, ch := range changes[i] {
			if ch.deleted {
				fmt.Fprintf(&in, "D %s\n", ch.path)
			} else {
				fmt.Fprintf(&in, "M %s %s %s\n", ch.mode, ch.sha, ch.path)
			}
		}
		in.WriteString("\n")
	}
	fmt.Fprintf(&in, "get-mark :%d\ndone\n", n)
	// --force: the branch is this worktree's own and follows the merges.
	res, err := w.run(ctx, withStdin(w.cmd("fast-import", "--quiet", "--force", "--date-format=now"), in.String()))
	if err != nil {
		return head, 0, fmt.Errorf("checkout: merge %d results: %w", n, err)
	}
	commit := strings.TrimSpace(string(res.Stdout))
	if !git.IsHex(commit) {
		return head, 0, fmt.Errorf("checkout: merge %d results: git fast-import printed %q", n, commit)
	}
	return commit, n, nil
}

// independentResults returns how many leading results of merges have their
// own commits on base and share none with another result before them.
func (w *Checkout) independentResults(ctx context.Context, base string, merges []pendingMerge) (int, error) {
	var in strings.Builder
	for _, m := range merges {
		in.WriteString(m.sha + "\n")
	}
	in.WriteString("^" + base + "\n")
	res, err := w.run(ctx, withStdin(w.cmd("rev-list", "--parents", "--stdin"), in.String()))
	if err != nil {
		return 0, fmt.Errorf("checkout: list results' commits: %w", err)
	}
	parents := map[string][]string{} // the results' commits not reachable from base
	for line := range strings.Lines(string(res.Stdout)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			parents[f[0]] = f[1:]
		}
	}
	owner := map[string]int{} // commit → the result whose walk reached it
	for i, m := range merges {
		if _, ok := parents[m.sha]; !ok {
			return i, nil // reachable from base: git decides what that merge is
		}
		stack := []string{m.sha}
		owner[m.sha] = i
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, p := range parents[c] {
				if _, own := parents[p]; !own {
					if p != base {
						return i, nil // also descends from something older than base
					}
					continue
				}
				if o, seen := owner[p]; seen {
					if o != i {
						return i, nil // shares history with an earlier result
					}
					continue
				}
				owner[p] = i
				stack = append(stack, p)
			}
		}
	}
	return len(merges), nil
}

// treeChange is one path a result changes against the base.
type treeChange struct {
	mode, sha, path string
	deleted, added  bool
}

// resultChanges lists, per result, the paths it changes against base, in
// one `git diff-tree --stdin` ("<commit> <parent>" lines diff the commit
// against the parent given).
func (w *Checkout) resultChanges(ctx context.Context, base string, merges []pendingMerge) ([][]treeChange, error) {
	var in strings.Builder
	index := make(map[string]int, len(merges))
	for i, m := range merges {
		in.WriteString(m.sha + " " + base + "\n")
		index[m.sha] = i
	}
	res, err := w.run(ctx, withStdin(w.cmd("diff-tree", "-r", "-z", "--no-renames", "--stdin"), in.String()))
	if err != nil {
		return nil, fmt.Errorf("checkout: list results' changes: %w", err)
	}
	changes := make([][]treeChange, len(merges))
	cur := -1
	fields := strings.Split(string(res.Stdout), "\x00")
	for k := 0; k < len(fields); k++ {
		f := fields[k]
		switch {
		case f == "":
		case f[0] != ':': // a result's header: its sha
			i, ok := index[f]
			if !ok {
				return nil, fmt.Errorf("checkout: git diff-tree printed %q", f)
			}
			cur = i
		default: // ":<old mode> <new mode> <old sha> <new sha> <status>", then the path
			raw := strings.Fields(f[1:])
			if cur < 0 || len(raw) != 5 || k+1 >= len(fields) {
				return nil, fmt.Errorf("checkout: git diff-tree printed %q", f)
			}
			k++
			status := raw[4]
			ch := treeChange{mode: raw[1], sha: raw[3], path: fields[k], deleted: status == "D", added: status == "A"}
			if _, err := strconv.ParseUint(ch.mode, 8, 32); err != nil || !git.IsHex(ch.sha) || !strings.ContainsAny(status[:1], "ADMT") {
				return nil, fmt.Errorf("checkout: git diff-tree printed %q", f)
			}
			changes[cur] = append(changes[cur], ch)
		}
	}
	return changes, nil
}

// disjointPrefix returns how many leading results' changes can be applied
// one after the other as git's merge would (see the rules above).
func disjointPrefix(changes [][]treeChange) int {
	changed := map[string]string{}   // paths changed so far: to what ("" deleted)
	under := map[string]bool{}       // directories holding one
	addedTo := map[string]bool{}     // directories a file was added to
	deletedFrom := map[string]bool{} // directories a file was deleted from
	deleted := false                 // by any result so far
	for i, chs := range changes {
		deletes := deleted
		for _, ch := range chs {
			deletes = deletes || ch.deleted
		}
		for _, ch := range chs {
			p := ch.path
			if p == "" || p[0] == '"' || strings.ContainsRune(p, '\n') || under[p] {
				return i
			}
			if to, ok := changed[p]; ok && (deletes || to != ch.to()) {
				// Changed before: git takes an identical change as
				// merged; with no deletion anywhere no rename can be
				// involved either.
				return i
			}
			for d := range parentDirs(p) {
				if _, ok := changed[d]; ok || (ch.added && deletedFrom[d]) || (ch.deleted && addedTo[d]) {
					return i
				}
			}
		}
		for _, ch := range chs {
			changed[ch.path] = ch.to()
			for d := range parentDirs(ch.path) {
				under[d] = true
				if ch.added {
					addedTo[d] = true
				}
				if ch.deleted {
					deletedFrom[d] = true
				}
			}
		}
		deleted = deletes
	}
	return len(changes)
}

// to is what a change leaves at its path: its mode and object, "" when it
// deletes it.
func (ch treeChange) to() string {
	if ch.deleted {
		return ""
	}
	return ch.mode + " " + ch.sha
}

// parentDirs yields the directories p is in, innermost first, not the
// root: "a/b/c" yields "a/b", "a".
func parentDirs(p string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p, '/') {
			p = p[:i]
			if !yield(p) {
				return
			}
		}
	}
}
