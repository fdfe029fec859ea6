package checkout

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// treeEntry is a file walkTree found: a directory's file descriptor and
// the name in it. Every look at it is relative to that descriptor, so the
// kernel resolves one name, not the whole path (a third of a snapshot's
// time went to resolving paths), and nothing on the way can be swapped
// for a symlink meanwhile.
type treeEntry struct {
	typ     fs.FileMode // the type the directory gave
	dir     int
	name    string
	dirPath string // for errors, with name (path)
}

// path is the entry's path, for errors: made only when one needs it, not
// for each of a snapshot's thousands of files.
func (e treeEntry) path() string { return e.dirPath + "/" + e.name }

// walkTree calls visit for every file under root but directories, with
// its slash-separated path relative to root, skipping every entry named
// .git (the worktree's link file, nested repositories' metadata). What
// vanishes mid-walk is not there; a directory swapped for anything else
// (a symlink) mid-walk is an error, never followed.
func walkTree(ctx context.Context, root string, visit func(rel string, e treeEntry) error) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: root, Err: err}
	}
	n := 0
	return walkDir(ctx, fd, root, "", 0, &n, visit)
}

// maxWalkDepth bounds how deep a walk goes: it holds a descriptor for each
// directory on its way down, and an agent may nest directories as deep as
// it likes. A path of full length (PATH_MAX, 4096) has fewer levels.
const maxWalkDepth = 2048

// errTooDeep is a tree nested deeper than maxWalkDepth.
var errTooDeep = errors.New("checkout: directories nested deeper than 2048 levels")

// walkDir walks the directory open as fd, depth levels below the root,
// and closes it.
func walkDir(ctx context.Context, fd int, path, rel string, depth int, n *int, visit func(string, treeEntry) error) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if depth > maxWalkDepth {
		return errTooDeep
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, d := range entries {
		if *n++; *n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		name := d.Name()
		if name == ".git" {
			continue
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		if !d.IsDir() {
			if err := visit(r, treeEntry{typ: d.Type(), dir: fd, name: name, dirPath: path}); err != nil {
				return err
			}
			continue
		}
		p := path + "/" + name
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		if err := walkDir(ctx, sub, p, r, depth+1, n, visit); err != nil {
			return err
		}
	}
	return nil
}

// readlink is the symlink's target.
func (e treeEntry) readlink() (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(e.dir, e.name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: e.path(), Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// lstat is what the file's lstat says that changes with its content, and
// its permission bits.
func (e treeEntry) lstat() (statKey, fs.FileMode, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(e.dir, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return statKey{}, 0, &os.PathError{Op: "lstat", Path: e.path(), Err: err}
	}
	k := statKey{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, dev: uint64(st.Dev)}
	return k, fs.FileMode(st.Mode & 0o777), nil
}

// hash hashes the file's content, if it is still a regular file.
func (e treeEntry) hash() ([sha256.Size]byte, error) {
	fd, err := unix.Openat(e.dir, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return [sha256.Size]byte{}, &os.PathError{Op: "open", Path: e.path(), Err: err}
	}
	return hashOpen(os.NewFile(uintptr(fd), e.path()))
}
