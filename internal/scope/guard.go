package scope

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// Guard notices what a CLI changed where no diff of its worktree looks: the
// git internals shared with every other worktree of the repository (config,
// hooks, info) or private to this one, the worktree's .git link, and files
// written next to the worktree. A changed hook or core.hooksPath would run
// code in the next git command of any attempt using the cache; a file
// outside the worktree is a write the task never asked for.
//
// Take the Guard after the worktree is prepared and before the CLI starts;
// call Violations once the CLI has exited. Drover's own git commands
// between the two (observe, checkpoint) write none of the watched files.
type Guard struct {
	worktree          string
	gitDir, commonDir string
	files             []watchedFile // git internals, snapshotted recursively
	dirs              []watchedDir  // extra directories, entries only
}

type watchedFile struct {
	path    string // absolute; a directory is walked
	label   string // how a violation names it
	shallow bool   // only the entry itself: a directory is not walked
	state   map[string]entryState
}

type watchedDir struct {
	path  string
	state map[string]entryState
}

// entryState is what a snapshot remembers of one entry.
type entryState struct {
	mode fs.FileMode // type bits and permissions
	hash [sha256.Size]byte
	dir  bool
}

// GitDirs are a worktree's git directories, when the caller knows them
// already (saving a git process each).
type GitDirs struct {
	Dir    string // private git dir: absolute, as `git rev-parse --absolute-git-dir` prints it
	Common string // common dir: the repository the worktree belongs to
}

// NewGuard snapshots:
//
//   - the worktree's .git: the agent's own repository (see package
//     worktree), so only the entry itself — replaced by a file or a
//     symlink (which could point git at the shared repository), or
//     deleted, is a change; what the agent does inside it is not;
//   - in the git common dir (the bare repository the worktree belongs to):
//     config, hooks/** and info/** and objects/info/alternates;
//   - in the worktree's private git dir: config.worktree, commondir, gitdir;
//   - the entries (not recursively) of each watch directory.
//
// Either of dirs may be empty: it is then asked of git (`git rev-parse
// --absolute-git-dir` or `--git-common-dir` in the worktree).
//
// A watch directory is meant to be the worktree's parent, which other
// attempts share: their worktrees (directories) appear and vanish while
// this one runs. So for watch directories only non-directory entries are
// compared — a new, changed or removed regular file, symlink or other
// non-directory is reported; directories coming and going are not. A CLI
// creating a directory beside its worktree goes unreported; one writing a
// file there does not.
func NewGuard(worktreePath string, dirs GitDirs, watch ...string) (*Guard, error) {
	wt, err := filepath.Abs(worktreePath)
	if err != nil {
		return nil, fmt.Errorf("scope: guard: %w", err)
	}
	g := &Guard{worktree: wt}
	gitDir, gitCommonDir := dirs.Dir, dirs.Common
	if gitDir == "" {
		if gitDir, err = gitPath(wt, "--absolute-git-dir"); err != nil {
			return nil, err
		}
	}
	if !filepath.IsAbs(gitDir) {
		return nil, fmt.Errorf("scope: guard: git dir %q is not absolute", gitDir)
	}
	gitDir = filepath.Clean(gitDir)
	if gitCommonDir == "" {
		if gitCommonDir, err = gitPath(wt, "--git-common-dir"); err != nil {
			return nil, err
		}
	}
	if !filepath.IsAbs(gitCommonDir) {
		gitCommonDir = filepath.Join(wt, gitCommonDir)
	}
	gitCommonDir = filepath.Clean(gitCommonDir)
	g.gitDir, g.commonDir = gitDir, gitCommonDir

	g.files = append(g.files, watchedFile{path: filepath.Join(wt, ".git"), label: ".git", shallow: true})
	for _, rel := range []string{"config", "hooks", "info", "objects/info/alternates"} {
		g.files = append(g.files, watchedFile{path: filepath.Join(gitCommonDir, rel), label: ".git/" + rel})
	}
	if gitDir != gitCommonDir {
		prefix := ".git/worktrees/" + filepath.Base(gitDir) + "/"
		if rel, err := filepath.Rel(gitCommonDir, gitDir); err == nil && Within(gitCommonDir, gitDir) {
			prefix = ".git/" + filepath.ToSlash(rel) + "/"
		}
		for _, name := range []string{"config.worktree", "commondir", "gitdir"} {
			g.files = append(g.files, watchedFile{path: filepath.Join(gitDir, name), label: prefix + name})
		}
	}
	for i := range g.files {
		if g.files[i].state, err = g.files[i].snapshot(); err != nil {
			return nil, err
		}
	}
	for _, d := range watch {
		d, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("scope: guard: %w", err)
		}
		st, err := snapshotDir(d)
		if err != nil {
			return nil, err
		}
		g.dirs = append(g.dirs, watchedDir{path: d, state: st})
	}
	return g, nil
}

// GitDir is the worktree's private git directory, as it was when the Guard
// was made: use it (GIT_DIR) for git commands after the CLI ran, so a
// rewritten .git file cannot redirect them.
func (g *Guard) GitDir() string { return g.gitDir }

// CommonDir is the git common dir (the repository the worktree belongs to).
func (g *Guard) CommonDir() string { return g.commonDir }

// Violations compares everything with the snapshot and returns the
// differences, sorted, e.g.
//
//	`.git/hooks/pre-commit` created: changes to git internals are not allowed
//	../escape.txt created outside the worktree
//
// A file that cannot be read now is reported as changed.
func (g *Guard) Violations() []string {
	var out []string
	for _, f := range g.files {
		cur, err := f.snapshot()
		if err != nil {
			out = append(out, fmt.Sprintf("`%s` unreadable (%v): %s", f.label, err, ReasonGitInternal))
			continue
		}
		for _, d := range diffStates(f.state, cur, false) {
			label := f.label
			if d.name != "" {
				label += "/" + d.name
			}
			out = append(out, fmt.Sprintf("`%s` %s: %s", label, d.change, ReasonGitInternal))
		}
	}
	for _, w := range g.dirs {
		cur, err := snapshotDir(w.path)
		if err != nil {
			out = append(out, fmt.Sprintf("%s unreadable (%v) outside the worktree", g.rel(w.path), err))
			continue
		}
		for _, d := range diffStates(w.state, cur, true) {
			out = append(out, fmt.Sprintf("%s %s outside the worktree", g.rel(filepath.Join(w.path, d.name)), d.change))
		}
	}
	slices.Sort(out)
	return out
}

// rel names p relative to the worktree ("../escape.txt").
func (g *Guard) rel(p string) string {
	if r, err := filepath.Rel(g.worktree, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

type difference struct{ name, change string }

// diffStates lists created, modified and deleted entries. With skipDirs,
// entries that are directories on both sides, or on the only side they
// exist, are not compared.
func diffStates(base, cur map[string]entryState, skipDirs bool) []difference {
	var out []difference
	for name, b := range base {
		c, ok := cur[name]
		switch {
		case !ok:
			if !(skipDirs && b.dir) {
				out = append(out, difference{name, "deleted"})
			}
		case c != b:
			if !(skipDirs && b.dir && c.dir) {
				out = append(out, difference{name, "modified"})
			}
		}
	}
	for name, c := range cur {
		if _, ok := base[name]; !ok && !(skipDirs && c.dir) {
			out = append(out, difference{name, "created"})
		}
	}
	return out
}

// snapshot records what f watches.
func (f watchedFile) snapshot() (map[string]entryState, error) {
	if !f.shallow {
		return snapshotTree(f.path)
	}
	e, err := stateOf(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]entryState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("scope: guard: %w", err)
	}
	if e.dir {
		e.mode = fs.ModeDir // a directory is a directory, whatever its permissions
	}
	return map[string]entryState{"": e}, nil
}

// snapshotTree records p and, when it is a directory, everything under it,
// keyed by slash path relative to p ("" for p itself). Symlinks are
// recorded by target, never followed. A missing p is an empty snapshot.
func snapshotTree(p string) (map[string]entryState, error) {
	st := map[string]entryState{}
	err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(p, path)
		if err != nil {
			return err
		}
		if rel == "." {
			rel = ""
		}
		e, err := stateOf(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.dir && rel == "" {
			return nil // the directory itself is not content
		}
		st[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scope: guard: snapshot %s: %w", p, err)
	}
	return st, nil
}

// snapshotDir records the entries directly in dir.
func snapshotDir(dir string) (map[string]entryState, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scope: guard: %w", err)
	}
	st := make(map[string]entryState, len(ents))
	for _, e := range ents {
		if e.IsDir() {
			st[e.Name()] = entryState{dir: true, mode: fs.ModeDir}
			continue
		}
		s, err := stateOf(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // vanished in between
			}
			return nil, fmt.Errorf("scope: guard: %w", err)
		}
		st[e.Name()] = s
	}
	return st, nil
}

// stateOf is the type, permissions and content hash (a symlink's target)
// of one entry, without following a symlink.
func stateOf(p string) (entryState, error) {
	info, err := os.Lstat(p)
	if err != nil {
		return entryState{}, err
	}
	e := entryState{mode: info.Mode().Type() | info.Mode().Perm()}
	switch {
	case info.IsDir():
		e.dir = true
	case info.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return entryState{}, err
		}
		e.hash = sha256.Sum256([]byte(t))
	case info.Mode().IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return entryState{}, err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return entryState{}, err
		}
		h.Sum(e.hash[:0])
	}
	return e, nil
}

// gitPath asks git, run in the worktree, for one of its directories. git
// runs hardened (internal/git): it looks for the repository in the
// worktree only, never a bare one there, nor further up the tree.
func gitPath(wt, flag string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := git.New(git.Options{})
	if err != nil {
		return "", fmt.Errorf("scope: guard: %w", err)
	}
	p, err := g.Output(ctx, git.Cmd{Dir: wt, Args: []string{"rev-parse", flag}})
	if err != nil {
		return "", fmt.Errorf("scope: guard: git rev-parse %s in %s: %w", flag, wt, err)
	}
	if p == "" {
		return "", fmt.Errorf("scope: guard: git rev-parse %s in %s printed nothing", flag, wt)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(wt, p)
	}
	return filepath.Clean(p), nil
}
