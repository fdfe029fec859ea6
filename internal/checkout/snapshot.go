package checkout

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
	"sync/atomic"
	"syscall"
)

// Modes as git records them; only what git can represent matters, so a
// change of group/other permission bits is not a change.
const (
	modeFile    uint32 = 0o100644
	modeExec    uint32 = 0o100755
	modeSymlink uint32 = 0o120000
)

// snapshotsTaken counts the walks, for tests: the Prepare of a parked
// checkout at its last baseline takes none (reuse.go).
var snapshotsTaken atomic.Uint64

type fileState struct {
	mode uint32
	hash [sha256.Size]byte
	stat statKey // what lstat said when hash was taken; zero: unknown
}

// snapshot maps slash-separated paths relative to the worktree root to
// their state.
type snapshot struct {
	files map[string]fileState
	// stamp is the file system's clock when the walk began (the mtime of a
	// file written then), or 0. A file whose ctime and mtime are both
	// before it has not changed since its hash was taken if lstat still
	// says the same; one changed since the stamp may share its old stat in
	// the clock's resolution ("racily clean", as git calls it) and is
	// always hashed.
	stamp int64
}

// stampFile is written in the worktree's private git dir to read the file
// system's clock.
const stampFile = "drover-snapshot-stamp"

// takeSnapshot records every regular file and symlink under root, whether
// tracked, untracked or ignored, so the comparison does not depend on what
// the agent told git. .git entries (the worktree's link file, nested
// repositories' metadata) are skipped; directories are implied by files,
// as in git; sockets, fifos and devices are not content and are skipped.
//
// A file's hash is taken from prev, an earlier snapshot of the same tree,
// when lstat still says what it said then and the file had not changed
// since prev's stamp; all others are read and hashed. For a checkout reused
// from an earlier attempt, or at Observe, that is the few files the last
// checkout or the agent wrote, instead of the whole repository. stampDir
// (the worktree's private git dir, never the worktree) is where the stamp
// is written; "" takes no stamp, and the next snapshot hashes everything.
func takeSnapshot(ctx context.Context, root, stampDir string, prev *snapshot) (*snapshot, error) {
	snapshotsTaken.Add(1)
	size := 0
	if prev != nil {
		size = len(prev.files) // most often the same tree: the map never grows
	}
	snap := &snapshot{files: make(map[string]fileState, size), stamp: writeStamp(stampDir)}
	var trusted map[string]fileState
	if prev != nil && prev.stamp != 0 {
		trusted = prev.files
	}
	err := walkTree(ctx, root, func(rel string, e treeEntry) error {
		switch {
		case e.typ&fs.ModeSymlink != 0:
			// Recorded as a link, never followed: the target may be
			// outside the worktree or not exist at all.
			target, err := e.readlink()
			if err != nil {
				return skipVanished(err)
			}
			snap.files[rel] = fileState{mode: modeSymlink, hash: sha256.Sum256([]byte(target))}
		case e.typ.IsRegular():
			stat, perm, err := e.lstat()
			if err != nil {
				return skipVanished(err)
			}
			st := fileState{mode: modeFile, stat: stat}
			if perm&0o100 != 0 { // git looks at the owner's x bit only
				st.mode = modeExec
			}
			if old, ok := trusted[rel]; ok && st.stat.unchangedSince(old.stat, prev.stamp) && old.mode == st.mode {
				st.hash = old.hash
			} else if st.hash, err = e.hash(); err != nil {
				return skipVanished(err)
			}
			snap.files[rel] = st
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkout: snapshot %s: %w", root, err)
	}
	return snap, nil
}

// writeStamp writes the stamp file in dir and returns its mtime, or 0.
func writeStamp(dir string) int64 {
	if dir == "" {
		return 0
	}
	p := filepath.Join(dir, stampFile)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return 0
	}
	info, err := os.Lstat(p)
	if err != nil {
		return 0
	}
	return statOf(info).mtime
}

// unchangedSince reports whether a file whose lstat said old then and says
// k now, with old's ctime and mtime before stamp, still has the content it
// had: any write or metadata change since would have set its ctime past
// stamp, which no program can set back.
func (k statKey) unchangedSince(old statKey, stamp int64) bool {
	return k.known() && k == old && old.ctime < stamp && old.mtime < stamp
}

func skipVanished(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// hashBufs are the read buffers of hashFile. A fresh checkout's snapshots
// hash every file of the worktree; io.Copy from an *os.File would make a
// fresh 32 KiB buffer for each one (File.WriteTo falls back to io.Copy),
// which for a repository of small files was most of what the worker
// allocated and a third of its CPU, in the garbage collector
// (docs/benchmarks.md).
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// hashFile hashes the regular file p. Something swapped in since the walk
// saw a file there (a process of the agent still running) is not followed
// (a symlink) nor waited on (a FIFO).
func hashFile(p string) ([sha256.Size]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return hashOpen(f)
}

// hashOpen hashes the open file f, which it closes, if it is a regular
// file.
func hashOpen(f *os.File) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return sum, fmt.Errorf("checkout: %s is no longer a regular file", f.Name())
	}
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	// Only the Reader: an *os.File's WriterTo would not use buf.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// compare returns sorted created, modified and deleted paths of cur
// relative to base, by mode and content.
func compare(base, cur *snapshot) (created, modified, deleted []string) {
	created, modified, deleted = []string{}, []string{}, []string{}
	for p, b := range base.files {
		c, ok := cur.files[p]
		switch {
		case !ok:
			deleted = append(deleted, p)
		case c.mode != b.mode || c.hash != b.hash:
			modified = append(modified, p)
		}
	}
	for p := range cur.files {
		if _, ok := base.files[p]; !ok {
			created = append(created, p)
		}
	}
	sortStrings(created, modified, deleted)
	return created, modified, deleted
}
