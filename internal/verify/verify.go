package verify

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/supervise"
)

// Defaults for zero Spec fields.
const (
	DefaultTimeout   = 10 * time.Minute
	DefaultMaxOutput = 64 << 10
)

// Spec is a list of commands to run in a directory.
type Spec struct {
	// Dir is the working directory, the attempt's worktree.
	Dir string
	// Commands are shell command lines, run in order with `sh -c`.
	Commands []string
	// Timeout bounds each command; 0 means DefaultTimeout.
	Timeout time.Duration
	// Env is the COMPLETE environment of each command: pass the CLI's
	// sanitised environment, never the worker's own.
	Env []string
	// MaxOutput is the number of bytes of output kept per command, split
	// into head and tail; 0 means DefaultMaxOutput.
	MaxOutput int64
	// Grace is the time between SIGTERM and SIGKILL on timeout; 0 means
	// supervise.DefaultGrace.
	Grace time.Duration
	// OnOutput, if set, receives each command's output as it is produced
	// (both streams). It must not block.
	OnOutput func(command string, p []byte)
	// Launch, if set, starts each command through it (supervise.Spec's
	// Launch): the sandbox that confines the attempt's CLI confines its
	// checks too.
	Launch func(supervise.Exec) (supervise.Exec, error)
}

// Run runs the commands in order and returns one result per command run.
// It stops after the first failure (non-zero exit, timeout, failure to
// start): later commands are neither run nor listed. A cancelled ctx stops
// the running command like a timeout would, and no further command starts;
// the caller tells that apart by ctx.Err().
func Run(ctx context.Context, s Spec) []event.CommandResult {
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	sh, shErr := shell()
	var out []event.CommandResult
	for _, c := range s.Commands {
		if ctx.Err() != nil {
			break
		}
		var r event.CommandResult
		if shErr != nil {
			r = event.CommandResult{Command: c, ExitCode: -1, Output: shErr.Error()}
		} else {
			r = runOne(ctx, sh, c, s)
		}
		out = append(out, r)
		if Failed(r) {
			break
		}
	}
	return out
}

// Failed reports whether a command's result is a failure.
func Failed(r event.CommandResult) bool { return r.ExitCode != 0 || r.TimedOut }

// Passed reports whether every result passed (true for none).
func Passed(results []event.CommandResult) bool {
	for _, r := range results {
		if Failed(r) {
			return false
		}
	}
	return true
}

// Describe says how a failed command failed, e.g. "`go test ./...` exited 1".
func Describe(r event.CommandResult) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("`%s` timed out after %s", r.Command, (time.Duration(r.DurationMS) * time.Millisecond).Round(time.Millisecond))
	case r.ExitCode < 0:
		return fmt.Sprintf("`%s` did not complete", r.Command)
	}
	return fmt.Sprintf("`%s` exited %d", r.Command, r.ExitCode)
}

func shell() (string, error) {
	if p, err := exec.LookPath("/bin/sh"); err == nil {
		return p, nil
	}
	p, err := exec.LookPath("sh")
	if err != nil {
		return "", fmt.Errorf("verify: no sh to run commands with: %w", err)
	}
	return filepath.Abs(p)
}

func runOne(ctx context.Context, sh, command string, s Spec) event.CommandResult {
	res := event.CommandResult{Command: command}
	buf := newHeadTail(s.MaxOutput)
	spec := supervise.Spec{
		Path: sh, Args: []string{"-c", command}, Dir: s.Dir, Env: s.Env,
		Timeout: s.Timeout, Grace: s.Grace,
		// Each stream's own capture is not what is reported (the log writer
		// sees both interleaved); keep it small.
		MaxCapture: 1,
		LogFile:    buf,
		Launch:     s.Launch,
	}
	if s.OnOutput != nil {
		spec.OnOutput = func(_ supervise.Stream, p []byte) { s.OnOutput(command, p) }
	}
	start := time.Now()
	r, err := supervise.Run(ctx, spec)
	if err != nil {
		res.ExitCode, res.DurationMS = -1, time.Since(start).Milliseconds()
		res.Output = err.Error()
		return res
	}
	res.ExitCode, res.DurationMS = r.ExitCode, r.Duration().Milliseconds()
	res.TimedOut = r.Outcome == supervise.TimedOut
	res.Output = buf.String()
	switch {
	case r.Outcome == supervise.Exited:
	case res.TimedOut:
		res.Output += fmt.Sprintf("\n[drover: timed out after %s; the process group was killed]\n", s.Timeout)
	case r.Outcome == supervise.Stopped:
		res.Output += fmt.Sprintf("\n[drover: stopped: %v]\n", r.StopCause)
	default:
		res.Output += fmt.Sprintf("\n[drover: killed by signal %s]\n", r.Signal)
	}
	if res.ExitCode == 0 && r.Outcome != supervise.Exited {
		res.ExitCode = -1
	}
	return res
}

// headTail keeps the first and last halves of max bytes written to it and
// counts the rest. supervise serialises writes to a LogFile, the lock is
// for String after the fact.
type headTail struct {
	mu       sync.Mutex
	half     int
	head, tl []byte
	total    int64
}

func newHeadTail(max int64) *headTail { return &headTail{half: int(max / 2)} }

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	if room := h.half - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		h.tl = append(h.tl, p...)
		if len(h.tl) > 2*h.half {
			h.tl = append(h.tl[:0:0], h.tl[len(h.tl)-h.half:]...)
		}
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tl := h.tl
	if len(tl) > h.half {
		tl = tl[len(tl)-h.half:]
	}
	omitted := h.total - int64(len(h.head)) - int64(len(tl))
	if omitted <= 0 {
		return string(h.head) + string(tl)
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted]…\n%s", h.head, omitted, tl)
}
