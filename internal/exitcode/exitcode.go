package exitcode

import "errors"

// The exit codes. Scripts may rely on them: they are part of the CLI.
const (
	// OK: the command did what was asked.
	OK = 0
	// Failed: the operation failed — a flow that did not succeed, a rebuild
	// that differs, no healthy runtime, an error on the way.
	Failed = 1
	// Usage: bad usage or input, refused before anything changed — flags
	// or arguments, an invalid flow file or configuration, input too large
	// or not a regular file, a request the controller refused as invalid.
	Usage = 2
	// NotFound: what the command names does not exist — a flow, a task, an
	// attempt or its report, a flow's events.
	NotFound = 3
	// Unreachable: no controller to talk to — NATS cannot be reached, or
	// nothing answers the controller's API on it. Trying later may work.
	Unreachable = 4
	// Busy: the data dir belongs to another running controller.
	Busy = 5
	// NoWorker: `submit --strict` refused a valid flow because no live
	// worker serves a runtime it needs; nothing was recorded. Trying
	// once the fleet serves it may work.
	NoWorker = 6
	// Interrupted: a signal (SIGINT, SIGTERM) stopped the command before
	// it finished; 128 + SIGINT, as shells report it.
	Interrupted = 130
)

// Error gives an error its exit code.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With wraps err with code; a nil err stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Of returns the code of the outermost *Error in err's chain, if any.
func Of(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}
