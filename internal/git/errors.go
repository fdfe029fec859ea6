package git

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrOutputTooLarge means git printed more than Drover is willing to hold
// in memory for that command.
var ErrOutputTooLarge = errors.New("git: output too large")

// MaxStderr bounds how much of git's stderr an Error keeps.
const MaxStderr = 4 << 10

// Error reports a failed git command.
type Error struct {
	Args     []string // git arguments, without the settings Drover always adds
	ExitCode int      // -1 if git did not exit normally (killed, not started)
	Stderr   string   // trimmed; at most MaxStderr (the tail is kept, where git puts the fatal line)
	Err      error    // underlying error from os/exec, or the context's error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("git:")
	for _, a := range e.Args {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	if e.ExitCode >= 0 {
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// newError is the Error of a command that failed with err: its exit code
// when git exited, and the context's error when ctx ended (git was killed).
func newError(ctx context.Context, args []string, err error, stderr string) *Error {
	e := &Error{Args: append([]string(nil), args...), ExitCode: -1, Stderr: strings.TrimSpace(stderr), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		e.ExitCode = ee.ExitCode()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		e.Err, e.ExitCode = ctxErr, -1
	}
	return e
}

// ExitCode is 0 for nil, the exit status of an *Error, or -1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.ExitCode
	}
	return -1
}
