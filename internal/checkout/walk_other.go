//go:build !linux

package checkout

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// treeEntry is a file walkTree found, by its path.
type treeEntry struct {
	typ  fs.FileMode
	path string
}

// walkTree calls visit for every file under root but directories, with
// its slash-separated path relative to root, skipping every entry named
// .git. What vanishes mid-walk is not there.
func walkTree(ctx context.Context, root string, visit func(rel string, e treeEntry) error) error {
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
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
		if p == root || d.IsDir() && d.Name() != ".git" {
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
		return visit(filepath.ToSlash(rel), treeEntry{typ: d.Type(), path: p})
	})
}

func (e treeEntry) readlink() (string, error) { return os.Readlink(e.path) }

func (e treeEntry) lstat() (statKey, fs.FileMode, error) {
	info, err := os.Lstat(e.path)
	if err != nil {
		return statKey{}, 0, err
	}
	return statOf(info), info.Mode().Perm(), nil
}

func (e treeEntry) hash() ([sha256.Size]byte, error) { return hashFile(e.path) }
