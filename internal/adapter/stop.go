package adapter

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/transcript"
)

// Stop is what to do about a CLI while it runs, by what its output says.
type Stop int

// The answers of StopOn.
const (
	// KeepRunning: nothing the output says ends the run early.
	KeepRunning Stop = iota
	// StopNow: the run cannot succeed any more, whatever the CLI does next.
	StopNow
	// StopAfterRetries: the CLI is retrying a rate limit or a refused
	// credential on its own; stop it if it is still at it after the
	// runtime's own_retry_timeout.
	StopAfterRetries
)

// StopOn decides from a running CLI's verdict. Refused credentials or a
// rate limit the CLI gave up on stop it at once: the run cannot succeed,
// and it may still take seconds to exit (codex uploads analytics, kilo
// flushes telemetry). While it retries one of them on its own it gets a
// while: a transient 429 that the CLI gets past is no failure, and copilot
// retries a 401 as a "transient_auth_error" (copilot/fail-401/stdout.txt),
// as a refreshed login may pass it; after that, Drover's fallback to
// another runtime is faster than gemini's 5 minutes of backoff or claude's
// 3 of a 401. Anything else runs on: a server error may pass, and the exit
// says how the run ended.
func StopOn(v transcript.Verdict) Stop {
	f := v.Failure
	switch {
	case f == nil:
		return KeepRunning
	case f.Class != drovertype.ClassAuthFailed && f.Class != drovertype.ClassRateLimited:
		return KeepRunning
	case v.Retrying:
		return StopAfterRetries
	}
	return StopNow
}

// StoppedByOutput is the cause a CLI is stopped with when its output
// showed a failure it would not get past (StopOn): the attempt reports the
// output's class, with the wait the output stated, not a crash.
type StoppedByOutput struct {
	Failure *transcript.Failure
	// Retrying is how long the CLI had been retrying when it was stopped;
	// 0 when it was stopped at once.
	Retrying time.Duration
}

func (e *StoppedByOutput) Error() string { return e.why() + ": " + e.Failure.String() }

func (e *StoppedByOutput) why() string {
	if e.Retrying > 0 {
		return fmt.Sprintf("Drover stopped the CLI after %s of its own retries", e.Retrying.Round(time.Millisecond))
	}
	return "Drover stopped the CLI at its first fatal error"
}

// stoppedError is the attempt's error for a CLI stopped by its output.
func stoppedError(e *StoppedByOutput) *Error {
	f := e.Failure
	return &Error{
		Class: f.Class, Category: drovertype.CategoryRuntime, Recoverable: f.Class == drovertype.ClassRateLimited,
		Message: f.Message + " (" + e.why() + ")",
		Status:  f.Status, RetryAfter: f.RetryAfter, ResetAt: f.ResetAt,
	}
}
