package native

import (
	"context"
	"time"
)

// Clock is the loop's time: budgets, retry waits and durations read it, so
// tests can move it by hand (nativetest.FakeClock).
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned stop is called first; stop reports whether it prevented f.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// Sleep waits d, or until ctx ends, and then returns its cause.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
