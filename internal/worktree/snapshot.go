package worktree

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Modes as git records them; only what git can represent matters, so a
// change of group/other permission bits is not a change.
const (
	modeFile    uint32 = 0o100644
	modeExec    uint32 = 0o100755
	modeSymlink uint32 = 0o120000
)

type fileState struct {
	mode uint32
	hash [sha256.Size]byte
}

// snapshot maps slash-separated paths relative to the worktree root to
// their state.
type snapshot map[string]fileState

// takeSnapshot records every regular file and symlink under root, whether
// tracked, untracked or ignored, so the comparison does not depend on what
// the agent told git. .git entries (the worktree's link file, nested
// repositories' metadata) are skipped; directories are implied by files,
// as in git; sockets, fifos and devices are not content and are skipped.
func takeSnapshot(ctx context.Context, root string) (snapshot, error) {
	snap := make(snapshot)
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Something vanished mid-walk: it is simply not there.
			if p != root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if p == root {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		typ := d.Type()
		switch {
		case typ.IsDir():
			return nil
		case typ&fs.ModeSymlink != 0:
			// Recorded as a link, never followed: the target may be
			// outside the worktree or not exist at all.
			target, err := os.Readlink(p)
			if err != nil {
				return skipVanished(err)
			}
			snap[rel] = fileState{mode: modeSymlink, hash: sha256.Sum256([]byte(target))}
		case typ.IsRegular():
			st, err := hashFile(p)
			if err != nil {
				return skipVanished(err)
			}
			snap[rel] = st
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("worktree: snapshot %s: %w", root, err)
	}
	return snap, nil
}

func skipVanished(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// hashBufs are the read buffers of hashFile. A snapshot hashes every file
// of the worktree twice per attempt; io.Copy from an *os.File would make a
// fresh 32 KiB buffer for each one (File.WriteTo falls back to io.Copy),
// which for a repository of small files was most of what the worker
// allocated and a third of its CPU, in the garbage collector
// (docs/benchmarks.md).
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func hashFile(p string) (fileState, error) {
	f, err := os.Open(p)
	if err != nil {
		return fileState{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fileState{}, err
	}
	st := fileState{mode: modeFile}
	if info.Mode().Perm()&0o100 != 0 { // git looks at the owner's x bit only
		st.mode = modeExec
	}
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	// Only the Reader: an *os.File's WriterTo would not use buf.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return fileState{}, err
	}
	h.Sum(st.hash[:0])
	return st, nil
}

// compare returns sorted created, modified and deleted paths of cur
// relative to base.
func compare(base, cur snapshot) (created, modified, deleted []string) {
	created, modified, deleted = []string{}, []string{}, []string{}
	for p, b := range base {
		c, ok := cur[p]
		switch {
		case !ok:
			deleted = append(deleted, p)
		case c != b:
			modified = append(modified, p)
		}
	}
	for p := range cur {
		if _, ok := base[p]; !ok {
			created = append(created, p)
		}
	}
	sortStrings(created, modified, deleted)
	return created, modified, deleted
}
