package scope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/flow"
)

// Reasons used in violations.
const (
	ReasonNotAllowed  = "outside the task's scope (matches no allow pattern)"
	ReasonDenied      = "outside the task's scope (matches a deny pattern)"
	ReasonGitInternal = "changes to git internals are not allowed"
	ReasonSymlinkOut  = "symlink points outside the worktree"
	ReasonAgentGit    = "the agent's commits cannot be taken"
)

// Check returns the violations among changes, sorted:
//
//   - a created, modified or deleted path that s does not allow (a nil s
//     allows every path);
//   - a created or modified symlink whose target, resolved against the
//     link's directory, lies outside root — lexically, or once every
//     existing symlink on the way is followed. This holds whatever s says:
//     a link out of the worktree is never a legitimate result;
//   - a changed path that is .git or lies under a .git directory (the
//     snapshot skips those, so this is a second line of defence);
//   - commits in the agent's repository that could not be taken
//     (Changes.AgentGit): forged objects, objects borrowed from another
//     repository, a HEAD that is not a plain file.
//
// root is the worktree's directory; paths in changes are slash-separated
// and relative to it.
func Check(root string, changes *checkout.Changes, s *flow.Scope) []string {
	if changes == nil {
		return nil
	}
	var out []string
	check := func(p string, symlinkCheck bool) {
		if gitInternal(p) {
			out = append(out, p+": "+ReasonGitInternal)
		}
		if s != nil && !s.Allows(p) {
			reason := ReasonNotAllowed
			if len(s.Deny) > 0 && !(&flow.Scope{Deny: s.Deny}).Allows(p) {
				reason = ReasonDenied
			}
			out = append(out, p+": "+reason)
		}
		if symlinkCheck {
			if target, bad := escapingSymlink(root, p); bad {
				out = append(out, p+": "+ReasonSymlinkOut+" (-> "+target+")")
			}
		}
	}
	for _, p := range changes.Created {
		check(p, true)
	}
	for _, p := range changes.Modified {
		check(p, true)
	}
	for _, p := range changes.Deleted {
		check(p, false)
	}
	if changes.AgentGit != "" {
		out = append(out, ".git: "+ReasonAgentGit+": "+changes.AgentGit)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func gitInternal(p string) bool {
	p = strings.TrimPrefix(filepath.ToSlash(p), "./")
	return p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/") || strings.HasSuffix(p, "/.git")
}

// escapingSymlink reports whether root/rel is a symlink leading out of root,
// and its target as written.
func escapingSymlink(root, rel string) (string, bool) {
	full := filepath.Join(root, filepath.FromSlash(rel))
	st, err := os.Lstat(full)
	if err != nil || st.Mode()&os.ModeSymlink == 0 {
		return "", false
	}
	target, err := os.Readlink(full)
	if err != nil {
		return "", false
	}
	root = filepath.Clean(root)
	// Lexically: the target as written, against the link's directory.
	dest := target
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(filepath.Dir(full), dest)
	}
	if !Within(root, filepath.Clean(dest)) {
		return target, true
	}
	// Resolved: links on the way (in the worktree or not, dangling or
	// not) may lead out.
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		realRoot = root
	}
	// A loop (ok false) leads nowhere: the kernel cannot follow it either.
	if resolved, ok := resolve(full); ok && !Within(realRoot, resolved) {
		return target, true
	}
	return target, false
}

// maxLinks bounds the symlinks followed by resolve, like the kernel's
// ELOOP limit.
const maxLinks = 40

// resolve follows every symlink in the absolute path p, including its last
// component, as far as the path exists; missing components are joined
// lexically. ok is false for a loop or too many links.
func resolve(p string) (string, bool) {
	todo := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		st, err := os.Lstat(next)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			// A missing component: what follows cannot be a link that
			// exists, so the rest is lexical.
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", false
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", false
		}
		if filepath.IsAbs(t) {
			cur = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return cur, true
}

// Within reports whether p is dir or lies under it (both cleaned, absolute).
func Within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}
