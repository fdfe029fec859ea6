package readlimit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if b, err := File(write("at-limit", 100), 100); err != nil || len(b) != 100 {
		t.Errorf("a file of exactly the limit: %d bytes, %v", len(b), err)
	}
	if b, err := File(write("empty", 0), 100); err != nil || len(b) != 0 {
		t.Errorf("an empty file: %d bytes, %v", len(b), err)
	}
	_, err := File(write("over", 101), 100)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) || tl.Size != 101 || !strings.Contains(err.Error(), "over: 101 B is larger than the limit of 100 B") {
		t.Errorf("a file one byte over: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "at-limit"), link); err != nil {
		t.Fatal(err)
	}
	if b, err := File(link, 100); err != nil || len(b) != 100 {
		t.Errorf("a symlink to a regular file: %d, %v", len(b), err)
	}
	if _, err := File(filepath.Join(dir, "missing"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestHugeSparseFile: a 1 GiB file is refused from its size, before any of
// it is read (it is sparse: reading it would take long, not the test).
func TestHugeSparseFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = File(p, 8<<20)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1.0 GiB is larger than the limit of 8.0 MiB") {
		t.Errorf("1 GiB file: %v", err)
	}
}

// TestNotRegular: directories, devices and FIFOs are refused without being
// opened: a FIFO with no writer would block the open forever.
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:          "is a directory",
		"/dev/zero":  "is a character device",
		"/dev/null":  "is a character device",
		fifo:         "is a named pipe (FIFO)",
		"/dev/stdin": "", // whatever stdin is under go test; never read
	} {
		done := make(chan error, 1)
		go func() { _, err := File(path, 8<<20); done <- err }()
		select {
		case err := <-done:
			if want == "" {
				continue
			}
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: File blocked", path)
		}
	}
}

// TestReader: a stream gets exactly limit bytes, never more than one past it.
func TestReader(t *testing.T) {
	if b, err := Reader(strings.NewReader("12345"), "stdin", 5); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	cr := &countingReader{r: zero{}}
	_, err := Reader(cr, "stdin", 1000)
	if !errors.Is(err, ErrTooLarge) || err.Error() != "stdin: larger than the limit of 1000 B" {
		t.Errorf("an endless stream: %v", err)
	}
	if cr.n != 1001 {
		t.Errorf("read %d bytes of an endless stream, want 1001", cr.n)
	}
	if _, err := Reader(iotestErr{}, "stdin", 10); err == nil || !strings.HasPrefix(err.Error(), "stdin: ") {
		t.Errorf("a failing stream: %v", err)
	}
}

type zero struct{}

func (zero) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(p, 3); err != nil {
		t.Error(err)
	}
	if err := Check(p, 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over: %v", err)
	}
	if err := Check("/dev/zero", 2); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: %v", err)
	}
}
