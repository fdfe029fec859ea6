package readlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/dustin/go-humanize"
)

// ErrTooLarge is matched (errors.Is) by a *TooLargeError.
var ErrTooLarge = errors.New("readlimit: too large")

// ErrNotRegular is matched (errors.Is) by a *NotRegularError.
var ErrNotRegular = errors.New("readlimit: not a regular file")

// TooLargeError is input above its limit. Size is the file's size when it
// was known before reading (a regular file); 0 for a stream.
type TooLargeError struct {
	Name  string
	Limit int64
	Size  int64
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("%s: %s is larger than the limit of %s", e.Name, humanize.IBytes(uint64(e.Size)), humanize.IBytes(uint64(e.Limit)))
	}
	return fmt.Sprintf("%s: larger than the limit of %s", e.Name, humanize.IBytes(uint64(e.Limit)))
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// NotRegularError is a path that names something other than a regular
// file (through symlinks): a directory, a FIFO, a device, a socket.
type NotRegularError struct {
	Name string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: is %s, not a regular file", e.Name, kind(e.Mode))
}

func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// Check refuses a path that is not a regular file of at most limit bytes,
// without opening it; for files that another library reads whole.
func Check(path string, limit int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkInfo(path, fi, limit)
}

func checkInfo(name string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return &NotRegularError{Name: name, Mode: fi.Mode()}
	}
	if fi.Size() > limit {
		return &TooLargeError{Name: name, Limit: limit, Size: fi.Size()}
	}
	return nil
}

// File reads the regular file at path, refusing anything else and anything
// above limit bytes.
func File(path string, limit int64) ([]byte, error) {
	// Stat first: opening a FIFO for reading blocks until a writer comes.
	if err := Check(path, limit); err != nil {
		return nil, err
	}
	// O_NONBLOCK keeps the open from blocking should the path have become a
	// FIFO since; it changes nothing for a regular file. The descriptor is
	// checked again, as that is what is read.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	return Reader(f, path, limit)
}

// Reader reads r to its end, at most limit bytes: it reads one byte more to
// tell a stream of exactly limit bytes from a longer one, and no further.
func Reader(r io.Reader, name string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return b, nil
}
