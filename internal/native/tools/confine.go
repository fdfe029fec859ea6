package tools

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/scope"
)

// Reasons a path is refused. They are written for the model, which reads
// them in a tool error, and for the operator, who reads them in the log.
const (
	ReasonOutside     = "outside the worktree"
	ReasonGit         = "inside .git: git's internals are not the task's to read or change"
	ReasonSymlinkOut  = scope.ReasonSymlinkOut
	ReasonSymlinkLoop = "too many levels of symbolic links"
	ReasonInvalid     = "not a valid path"
	ReasonNotAllowed  = scope.ReasonNotAllowed
	ReasonDenied      = scope.ReasonDenied
	ReasonNotRegular  = "not a regular file"
	ReasonHardLinked  = "has several hard links, so it may be shared with a file outside the worktree"
)

// maxLinks bounds the symlinks followed resolving one path, like the
// kernel's ELOOP limit.
const maxLinks = 40

// Refusal is a path the model asked for and did not get.
type Refusal struct {
	Tool   string `json:"tool"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (r *Refusal) Error() string { return r.Path + ": " + r.Reason }

// lexical maps a path the model wrote to a clean, slash-separated path
// relative to the worktree, without touching the file system: absolute
// paths must lie in the worktree (as given, or as its symlinks resolve),
// relative ones are taken from the worktree, and nothing may climb out of
// it or into a .git directory. "" and "." are the worktree itself.
func (s *Set) lexical(p string) (string, string) {
	if strings.ContainsRune(p, 0) || !utf8Valid(p) {
		return "", ReasonInvalid
	}
	var rel string
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		switch {
		case scope.Within(s.dir, p):
			rel, _ = filepath.Rel(s.dir, p)
		case s.real != s.dir && scope.Within(s.real, p):
			rel, _ = filepath.Rel(s.real, p)
		default:
			return "", ReasonOutside
		}
	} else {
		rel = filepath.Clean(p)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", ReasonOutside
		}
	}
	rel = filepath.ToSlash(rel)
	if inGit(rel) {
		return "", ReasonGit
	}
	return rel, ""
}

// canonical follows every symlink on rel's way, inside the worktree, and
// returns the path it leads to, relative to the worktree: the path a change
// would show up at in git. A link that leads out of the worktree, or into
// .git, is refused. Components that do not exist yet are kept as written.
func (s *Set) canonical(rel string) (string, string) {
	todo := splitRel(rel)
	var done []string
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			if len(done) == 0 {
				return "", ReasonSymlinkOut // only a link's target can climb here: lexical paths cannot
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, name)...)
		st, err := s.root.Lstat(cur)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Nothing below a missing component exists either.
				done = append(done, name)
				done = append(done, todo...)
				break
			}
			if isEscape(err) {
				return "", ReasonSymlinkOut
			}
			// ENOTDIR and the like: let the operation report it.
			done = append(done, name)
			continue
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = append(done, name)
			continue
		}
		if links++; links > maxLinks {
			return "", ReasonSymlinkLoop
		}
		target, err := s.root.Readlink(cur)
		if err != nil {
			return "", ReasonSymlinkOut
		}
		var next []string
		if filepath.IsAbs(target) {
			t := filepath.Clean(target)
			var r string
			switch {
			case scope.Within(s.dir, t):
				r, _ = filepath.Rel(s.dir, t)
			case s.real != s.dir && scope.Within(s.real, t):
				r, _ = filepath.Rel(s.real, t)
			default:
				return "", ReasonSymlinkOut
			}
			next = splitRel(filepath.ToSlash(r))
		} else {
			next = append(append([]string(nil), done...), splitRaw(target)...)
		}
		todo = append(next, todo...)
		done = done[:0]
	}
	out := path.Join(done...)
	if out == "" {
		out = "."
	}
	if inGit(out) {
		return "", ReasonGit
	}
	return out, ""
}

// allowsChange says whether the task's scope lets it change rel, and why not.
func allowsChange(sc *flow.Scope, rel string) string {
	if sc.Allows(rel) {
		return ""
	}
	if len(sc.Deny) > 0 && !(&flow.Scope{Deny: sc.Deny}).Allows(rel) {
		return ReasonDenied
	}
	return ReasonNotAllowed
}

// inGit reports whether a clean slash path is .git or lies under a .git
// directory at any depth (submodules and nested repositories have theirs).
func inGit(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// splitRel splits a clean relative slash path; "." is no component.
func splitRel(rel string) []string {
	if rel == "" || rel == "." {
		return nil
	}
	return strings.Split(rel, "/")
}

// splitRaw splits a symlink target as written, dropping empty and "."
// components but keeping "..", which canonical resolves.
func splitRaw(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// isEscape reports whether err is os.Root refusing a path that leaves it.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func utf8Valid(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s
}
