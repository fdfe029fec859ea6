package worker

import (
	"context"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// A worker whose attempt met a rate limit knows of it before the
// controller: the report still has to be stored and folded, and the
// controller has to decide the cooldown and withdraw what is queued. In
// that time this worker's freed slot would pull the next queued attempt of
// the same runtime, certain to meet the limit too. So the worker stops
// pulling that runtime's jobs for as long as the CLI said to wait (else
// cooldown.default); the controller's cooldown holds the rest of the fleet
// (docs/design.md#cooldowns). Nothing else depends on this pause: it is
// in memory, and a restarted worker relies on the controller alone.

// pausedNak bounds how long a job fetched for a paused runtime is kept from
// redelivery: the pause ends about when the controller's cooldown does, and
// then the job may be the cooldown's probe, which must not wait long.
const pausedNak = 5 * time.Second

// pauses are the runtimes a worker does not pull jobs for, until when.
type pauses struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// limit pauses runtime after an attempt of it reported rep at now.
func (p *pauses) limit(runtime string, rep *event.Report, now time.Time, dflt, most time.Duration) (time.Time, bool) {
	if rep == nil || rep.Success || rep.Error == nil || rep.Error.Class != drovertype.ClassRateLimited {
		return time.Time{}, false
	}
	wait := dflt
	switch e := rep.Error; {
	case e.ResetAt.After(now):
		wait = e.ResetAt.Sub(now)
	case e.RetryAfterMS > 0:
		wait = time.Duration(e.RetryAfterMS) * time.Millisecond
	}
	until := now.Add(min(wait, most))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = map[string]time.Time{}
	}
	if until.After(p.until[runtime]) {
		p.until[runtime] = until
	}
	return p.until[runtime], true
}

// left is how long runtime stays paused after now; 0 when it is not.
func (p *pauses) left(runtime string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.until[runtime].Sub(now), 0)
}

// wait blocks while runtime is paused; false when ctx ended first.
func (p *pauses) wait(ctx context.Context, runtime string, now func() time.Time) bool {
	for {
		d := p.left(runtime, now())
		if d == 0 {
			return true
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false
		}
	}
}
