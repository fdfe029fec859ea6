//go:build !linux

package checkout

import (
	"os"
	"path/filepath"
)

// newDirAt creates the directory name in dir, which must not exist, and in
// it files (a path ending in "/" is an empty directory). Without Linux's
// *at calls it does so by path; files are still created exclusively.
func newDirAt(dir, name string, files map[string][]byte) error {
	root := filepath.Join(dir, name)
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if body == nil && rel[len(rel)-1] == '/' {
			continue
		}
		if err := newFileAt(filepath.Dir(p), filepath.Base(p), body); err != nil {
			return err
		}
	}
	return nil
}

// newFileAt creates the file name in dir, which must not exist.
func newFileAt(dir, name string, body []byte) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
