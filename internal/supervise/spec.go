package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Defaults applied by Start when the corresponding Spec field is zero.
const (
	DefaultGrace      = 5 * time.Second
	DefaultMaxCapture = 1 << 20 // 1 MiB per stream
)

const (
	// readBufSize is the fixed buffer each output reader uses; together with
	// MaxCapture it is all the memory a stream costs, however much it prints.
	readBufSize = 32 << 10

	// drainTimeout bounds how long Wait keeps reading the output pipes after
	// the leader exited and its group was killed. Members of the group are
	// dead by then, so the pipes normally hit EOF at once; only a process
	// outside the group (a setsid escapee) can hold them open, and it must
	// not be able to block Wait.
	drainTimeout = time.Second
)

var (
	// ErrTimeout is the StopCause when Spec.Timeout elapsed.
	ErrTimeout = errors.New("supervise: wall-clock timeout")
	// ErrNoOutput is the StopCause when neither stream produced a byte for
	// Spec.NoOutputTimeout.
	ErrNoOutput = errors.New("supervise: no output timeout")
	// ErrStopped is the StopCause when Stop was called with a nil cause.
	ErrStopped = errors.New("supervise: stopped")
	// ErrStart wraps every failure to launch the process (bad spec, pipe
	// creation, fork/exec). The underlying os error is wrapped too, so
	// errors.Is(err, fs.ErrNotExist) / fs.ErrPermission tell a missing or
	// non-executable binary apart.
	ErrStart = errors.New("supervise: start failed")
	// ErrInvalidSpec is wrapped (together with ErrStart) when the Spec itself
	// is unusable, e.g. a relative Path.
	ErrInvalidSpec = errors.New("supervise: invalid spec")
)

// Stream names one of the two output streams.
type Stream int

const (
	Stdout Stream = iota + 1
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", int(s))
}

// Spec describes one process to run.
type Spec struct {
	// Path is the absolute path of the binary. Callers resolve it (against
	// the environment they are about to pass), so a relative path is
	// rejected rather than guessed.
	Path string
	// Args is argv[1:]; argv[0] is Path.
	Args []string
	// Dir is the working directory (the worktree). Empty means the worker's
	// own working directory.
	Dir string
	// Env is the COMPLETE environment of the child. Nothing of the parent's
	// environment is added: nil means an empty environment, not "inherit".
	Env []string
	// Stdin is fed to the child. nil means /dev/null. An *os.File is handed
	// to the child directly; any other reader is copied through a pipe by a
	// goroutine that Wait waits for, so it must not block forever once the
	// process is gone (readers over memory or files are fine).
	Stdin io.Reader

	// Timeout is the wall-clock limit; 0 means none.
	Timeout time.Duration
	// NoOutputTimeout stops the process when neither stream produced a byte
	// for this long; 0 means none.
	NoOutputTimeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL to the group when the
	// process is stopped. Zero or negative means DefaultGrace.
	Grace time.Duration
	// MaxCapture is the number of bytes kept per stream, split into a head
	// and a tail half; the middle is dropped and counted. Zero or negative
	// means DefaultMaxCapture.
	MaxCapture int64

	// OnOutput, if set, is called from the reader goroutines with each chunk
	// read. The slice is only valid during the call (copy it). Calls for one
	// stream are sequential; calls for stdout and stderr may be concurrent.
	// It must not block for long: while it runs, that stream is not read and
	// a child writing to it stalls.
	OnOutput func(s Stream, p []byte)
	// Limits are resource limits applied to the process (0 = unlimited by Drover).
	Limits Limits
	// Launch, if set, is called just before the fork with the program to
	// start and returns the one to start instead, with files the child
	// gets as descriptors 3, 4, …, which Start closes once the child has
	// them. internal/sandbox uses it to put a re-exec step between the fork
	// and the CLI's exec; the process group, the parent-death signal, the
	// limits and everything above apply to what Launch returns, and so,
	// through its exec, to the CLI. Path must still name the real binary:
	// Start checks it is executable first.
	Launch func(Exec) (Exec, error)
	// LogFile, if set, receives every byte of both streams, interleaved in
	// the order read, unbounded. Writes are serialised. After the first
	// write error the log is abandoned (capture and OnOutput go on) and the
	// error is reported in Result.LogErr.
	LogFile io.Writer
}

// Exec is a program as the kernel starts it.
type Exec struct {
	Path  string
	Argv  []string   // argv[0] included
	Files []*os.File // the child's descriptors 3, 4, …
}

// withDefaults returns a copy of s with zero fields defaulted and Env made
// non-nil (os.StartProcess reads a nil Env as "inherit the parent's").
func (s Spec) withDefaults() Spec {
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.MaxCapture <= 0 {
		s.MaxCapture = DefaultMaxCapture
	}
	if s.Env == nil {
		s.Env = []string{}
	}
	return s
}

// Captured is the bounded capture of one stream.
type Captured struct {
	Head, Tail []byte // first and last bytes; Tail is empty when everything fits in Head
	Total      int64  // bytes the stream produced
	Truncated  bool   // Total > len(Head)+len(Tail): the middle was dropped
}

// Omitted is the number of bytes dropped between Head and Tail.
func (c Captured) Omitted() int64 {
	return c.Total - int64(len(c.Head)) - int64(len(c.Tail))
}

// String joins head and tail, marking the dropped middle if there is one.
func (c Captured) String() string {
	if !c.Truncated {
		return string(c.Head) + string(c.Tail)
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted]…\n%s", c.Head, c.Omitted(), c.Tail)
}

// Outcome is how a process ended.
type Outcome string

const (
	Exited   Outcome = "exited"    // exited by itself (any exit code)
	Signaled Outcome = "signaled"  // killed by a signal nobody here sent
	TimedOut Outcome = "timed_out" // stopped because Spec.Timeout elapsed
	Hung     Outcome = "hung"      // stopped because of Spec.NoOutputTimeout
	Stopped  Outcome = "stopped"   // stopped by Stop or by ctx cancellation
)

// Result is what Wait reports.
type Result struct {
	Outcome  Outcome
	ExitCode int    // -1 when killed by a signal
	Signal   string // e.g. "killed", "terminated"; "" if it exited
	// Killed is true when SIGKILL had to be sent to the group because the
	// leader outlived the grace period after SIGTERM.
	Killed         bool
	Started, Ended time.Time // Ended is when the leader's exit was observed
	Stdout, Stderr Captured
	// StopCause is why the process was stopped (the ctx cause, the Stop
	// argument, ErrTimeout, ErrNoOutput); nil when it exited by itself.
	StopCause error
	// OutputAbandoned is true when an output pipe was still held open by a
	// process outside the group when the drain deadline passed; whatever it
	// wrote after that is lost.
	OutputAbandoned bool
	// LogErr is the first error writing Spec.LogFile, if any.
	LogErr error
	// LimitErr says a configured resource limit could not be applied.
	LimitErr error
	// Err reports a supervision failure after a successful start (the exit
	// status could not be collected); nil normally.
	Err error
}

// Duration is the wall-clock run time of the leader.
func (r *Result) Duration() time.Duration { return r.Ended.Sub(r.Started) }

// Limits are POSIX resource limits for a CLI. They are applied with prlimit
// right after exec, so a process can run for a moment before they bind;
// they guard against runaways, not against hostile code.
type Limits struct {
	CPUSeconds   uint64 // RLIMIT_CPU
	AddressSpace uint64 // RLIMIT_AS, bytes
	OpenFiles    uint64 // RLIMIT_NOFILE
	FileSize     uint64 // RLIMIT_FSIZE, bytes
}
