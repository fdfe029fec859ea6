package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is how long a Waiter waits between tries of a step. A zero field
// means its default.
type Backoff struct {
	// Initial is the wait after the first failed try. Defaults to 100ms.
	Initial time.Duration
	// Max caps every wait. Defaults to 5s.
	Max time.Duration
	// Multiplier grows the wait after each failed try. Defaults to 2.
	Multiplier float64
	// Jitter is the part of each wait drawn at random, above 0 and up to 1
	// (anything from nothing to the full wait), so that many processes
	// started together do not try together. Defaults to 0.5.
	Jitter float64
	// TryTimeout bounds each try. Defaults to 10s.
	TryTimeout time.Duration
}

// WithDefaults fills zero fields.
func (b Backoff) WithDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Multiplier < 1 {
		b.Multiplier = 2
	}
	if b.Jitter <= 0 || b.Jitter > 1 {
		b.Jitter = 0.5
	}
	if b.TryTimeout <= 0 {
		b.TryTimeout = 10 * time.Second
	}
	return b
}

// Options configures a Waiter. A zero field means its default.
type Options struct {
	Backoff Backoff
	// Sleep waits d, or less if ctx ends first, returning ctx's error then.
	// Defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter. Defaults to math/rand/v2.
	Rand func() float64
	// Now is the clock the log's waited times are read from. Defaults to
	// time.Now.
	Now func() time.Time
}

// ErrStopped is wrapped by the error Wait returns when its context ended
// first, together with the context's cause: a daemon asked to stop while it
// waits exits cleanly.
var ErrStopped = errors.New("startup: stopped")

// Waiter runs a daemon's start steps in order and reports, for /readyz,
// which one it waits for. It is safe for concurrent use.
type Waiter struct {
	log     *slog.Logger
	backoff Backoff
	sleep   func(ctx context.Context, d time.Duration) error
	rand    func() float64
	now     func() time.Time

	mu    sync.Mutex
	state string // why the daemon is not ready; "" once Done
}

// New returns a Waiter logging to log.
func New(log *slog.Logger, o Options) *Waiter {
	w := &Waiter{log: log, backoff: o.Backoff.WithDefaults(), sleep: o.Sleep, rand: o.Rand, now: o.Now, state: "starting"}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.sleep == nil {
		w.sleep = sleep
	}
	if w.rand == nil {
		w.rand = rand.Float64
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait calls try until it returns nil, returns an error marked Fatal
// (returned as is), or ctx ends (an error wrapping ErrStopped and ctx's
// cause). Each try gets a context bounded by Backoff.TryTimeout. what names
// the step in the log and in Check: "NATS", "JetStream".
//
// It logs a warning when the step first fails and again only when the
// reason (the error's text) changes, and an info line when the step
// succeeds after failing.
func (w *Waiter) Wait(ctx context.Context, what string, try func(ctx context.Context) error) error {
	start := w.now()
	reason := ""
	interval := w.backoff.Initial
	w.setState("waiting for " + what)
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(ctx, w.backoff.TryTimeout)
		err := try(tctx)
		if err != nil && !IsFatal(err) && errors.Is(err, context.DeadlineExceeded) && tctx.Err() != nil && ctx.Err() == nil {
			// The try's own bound, not the caller's: say how long.
			err = fmt.Errorf("%w (no answer in %s)", err, w.backoff.TryTimeout)
		}
		cancel()
		switch {
		case err == nil:
			if reason != "" {
				w.log.Info(what+" ready", "waited", w.now().Sub(start).Round(time.Millisecond), "tries", tries)
			}
			w.setState("starting")
			return nil
		case ctx.Err() != nil:
			return w.stopped(ctx, what)
		case IsFatal(err):
			w.setState(fmt.Sprintf("%s: %v", what, err))
			return err
		}
		if r := err.Error(); r != reason {
			if reason == "" {
				w.log.Warn("waiting for "+what, "reason", r)
			} else {
				w.log.Warn("still waiting for "+what, "reason", r, "waited", w.now().Sub(start).Round(time.Millisecond))
			}
			reason = r
		}
		w.setState(fmt.Sprintf("waiting for %s: %s", what, reason))
		if w.sleep(ctx, w.jittered(interval)) != nil || ctx.Err() != nil {
			return w.stopped(ctx, what)
		}
		interval = min(time.Duration(float64(interval)*w.backoff.Multiplier), w.backoff.Max)
	}
}

// jittered takes a random part, at most Backoff.Jitter of it, off d: a
// wait never exceeds the cap.
func (w *Waiter) jittered(d time.Duration) time.Duration {
	return d - time.Duration(w.backoff.Jitter*w.rand()*float64(d))
}

func (w *Waiter) stopped(ctx context.Context, what string) error {
	w.setState("stopping")
	return fmt.Errorf("%w while waiting for %s: %w", ErrStopped, what, context.Cause(ctx))
}

func (w *Waiter) setState(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != "" { // Done is final
		w.state = s
	}
}

// Done marks the daemon ready: Check passes from now on.
func (w *Waiter) Done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state = ""
}

// Check is a readiness check: an error saying what the daemon waits for
// ("waiting for NATS: …", with the last try's error once one failed), or
// "starting" between steps, until Done.
func (w *Waiter) Check(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == "" {
		return nil
	}
	return errors.New(w.state)
}

// Fatal marks err as one that waiting cannot fix — a configuration error,
// credentials the server refuses — so that Wait returns it at once. Fatal
// of nil is nil.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// IsFatal reports whether err was marked by Fatal.
func IsFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }
