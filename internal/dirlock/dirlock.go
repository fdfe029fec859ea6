package dirlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// FileName is the lock file inside the locked directory.
const FileName = "LOCK"

// ErrHeld is matched (errors.Is) by the error of Acquire when another
// process, or another Lock of this one, holds the directory.
var ErrHeld = errors.New("dirlock: directory in use")

// Holder is what the owner of a directory writes in its lock file.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Host    string    `json:"host,omitempty"`
	Since   time.Time `json:"since"`
}

// HeldError says which process holds the directory; Holder is zero when
// the lock file could not be read (the owner may not have written it yet).
type HeldError struct {
	Dir    string
	Holder Holder
}

func (e *HeldError) Error() string {
	who := "another process (it has not written its pid yet)"
	if h := e.Holder; h.PID != 0 {
		who = fmt.Sprintf("pid %d (%s)", h.PID, h.Command)
		if h.Host != "" {
			who += " on " + h.Host
		}
		if !h.Since.IsZero() {
			who += ", running since " + h.Since.Local().Format(time.DateTime)
		}
	}
	return fmt.Sprintf("data dir %s is in use by %s: stop it first, or give this process another --data-dir", e.Dir, who)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held directory. The lock is an flock on an open file
// description: the kernel drops it when the process exits, however it
// exits, so a lock file left by a dead process is simply taken over. The
// descriptor is close-on-exec: the CLIs a controller starts do not inherit
// it and cannot keep the directory locked after their parent died.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes dir's lock for this process, creating dir if needed, and
// writes the holder (this process, described by command, e.g. its command
// line without secrets) into the lock file. It does not wait: when the lock
// is held it returns a *HeldError naming the holder, and changes nothing in
// dir.
func Acquire(dir, command string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// O_RDWR without O_TRUNC: a refused process must not erase the owner's
	// details; it only reads them.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, Holder: readHolder(path)}
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	if err := writeHolder(f, command); err != nil {
		_ = f.Close() // closing drops the flock
		return nil, fmt.Errorf("dirlock: %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// Release empties the lock file and drops the lock. The file stays: removing
// it could let two processes lock two different files of the same name. It
// is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	terr := f.Truncate(0)
	cerr := f.Close()
	if err := errors.Join(terr, cerr); err != nil {
		return fmt.Errorf("dirlock: release %s: %w", l.path, err)
	}
	return nil
}

// Read returns the holder written in dir's lock file, and whether a process
// holds the lock now; it takes nothing. A lock file left by a process that
// exited reads as not held.
func Read(dir string) (Holder, bool) {
	path := filepath.Join(dir, FileName)
	h := readHolder(path)
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return h, false
	}
	defer f.Close()
	if err := flock(f); err != nil {
		return h, errors.Is(err, syscall.EWOULDBLOCK)
	}
	return h, false // closing f drops the lock just taken
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// maxHolder bounds what is read from a lock file: it is ours, but the data
// dir may be shared with whoever else can write there.
const maxHolder = 4 << 10

func readHolder(path string) Holder {
	var h Holder
	f, err := os.Open(path)
	if err != nil {
		return h
	}
	defer f.Close()
	b := make([]byte, maxHolder)
	n, _ := f.Read(b)
	_ = json.Unmarshal(b[:n], &h)
	return h
}

func writeHolder(f *os.File, command string) error {
	if len(command) > 512 {
		command = command[:512] + "…"
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Command: command, Host: host, Since: time.Now().UTC().Truncate(time.Second)}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}
