//go:build linux

package checkout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// newDirAt creates the directory name in dir, which must not exist, and in
// it files (a path ending in "/" is an empty directory), exclusively and
// through descriptors: nothing is written through a symlink a process of
// the agent may put in the way, even one racing this.
func newDirAt(dir, name string, files map[string][]byte) error {
	parent, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, name, 0o755); err != nil {
		return &os.PathError{Op: "mkdir", Path: filepath.Join(dir, name), Err: err}
	}
	root, err := openDirAt(parent, name)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err}
	}
	defer unix.Close(root)
	for rel, body := range files {
		d, base := filepath.Split(rel)
		fd, err := mkdirsAt(root, strings.Trim(d, "/"))
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, name, d), err)
		}
		if base != "" {
			err = writeAt(fd, base, body)
		}
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, name, rel), err)
		}
	}
	return nil
}

// newFileAt creates the file name in dir, which must not exist.
func newFileAt(dir, name string, body []byte) error {
	parent, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(parent)
	return writeAt(parent, name, body)
}

func openDirAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// mkdirsAt makes the slash-separated rel beneath dir, as far as it does not
// exist, and returns a descriptor of it (dir itself for "").
func mkdirsAt(dir int, rel string) (int, error) {
	fd := dir
	if rel == "" {
		return fd, nil
	}
	for _, part := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(fd, part, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			if fd != dir {
				unix.Close(fd)
			}
			return -1, err
		}
		next, err := openDirAt(fd, part)
		if fd != dir {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func writeAt(dir int, name string, body []byte) error {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
