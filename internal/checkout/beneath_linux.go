//go:build linux

package checkout

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// readBeneath reads up to max bytes of the regular file rel under root,
// without following a symlink anywhere on the way (the agent may have put
// one there), without leaving root, and without waiting on a FIFO. A
// missing file is os.ErrNotExist; anything else unusual is an error.
func readBeneath(root, rel string, max int) ([]byte, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOSYS) {
		return nil, errNoOpenat2
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, rel))
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("checkout: %s is not a regular file", f.Name())
	}
	if info.Size() > int64(max) {
		return nil, fmt.Errorf("checkout: %s is larger than %d bytes", f.Name(), max)
	}
	buf := make([]byte, info.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// errNoOpenat2 means the kernel cannot open a path without following
// symlinks (before Linux 5.6): the caller asks git.
var errNoOpenat2 = errors.New("checkout: no openat2")
