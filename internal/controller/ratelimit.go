package controller

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/policy"
)

// A rate limit does not use up a task's attempts: an attempt that meets
// one, or that a cooldown withdrew before it ran, is not counted against
// max_attempts. Waiting out limits is bounded by time instead,
// retry.rate_limit_wait (docs/design.md#cooldowns): from the end of the
// first of the task's latest attempts that met a limit or were withdrawn,
// or from when it began to wait for a cooldown if that was earlier. Both
// are in the log, so a restarted controller counts the same time.

// run is what a task's attempts since the last operator retry say about
// the retry policy's bounds.
type run struct {
	// counted are the attempts that count against max_attempts.
	counted int
	// limitedSince is when the task began meeting rate limits, zero when
	// its latest attempt did not meet one.
	limitedSince time.Time
}

// attemptRun reads a task's attempts since the last operator retry.
func (dc *decider) attemptRun(f *projection.Flow, t *projection.Task) run {
	var r run
	limited := true // still in the run of limits that ends with the latest attempt
	for i := t.Attempts; i > t.RetryBase; i-- {
		a := dc.st.Attempts[drovertype.AttemptID(f.ID, t.ID, i)]
		if a == nil {
			continue
		}
		withdrawn := a.State == drovertype.AttemptWithdrawn
		class := classOf(a)
		if !withdrawn && (!a.State.Terminal() || policy.Counts(class)) {
			r.counted++
		}
		if !limited {
			continue
		}
		if !withdrawn && class != drovertype.ClassRateLimited {
			limited = false
			continue
		}
		end := a.EndedAt
		if end.IsZero() {
			end = a.ScheduledAt
		}
		r.limitedSince = end
	}
	if w := t.Wait; w != nil && len(w.Cooldowns) > 0 && !r.limitedSince.IsZero() && w.Since.Before(r.limitedSince) {
		// The task waited for a cooldown before the first of them.
		if first := dc.st.Attempts[drovertype.AttemptID(f.ID, t.ID, w.N)]; first != nil && first.EndedAt.Equal(r.limitedSince) {
			r.limitedSince = w.Since
		}
	}
	return r
}

// limitedOut ends a task that cooldowns hold back once it has waited out
// rate limits for its retry.rate_limit_wait: RATE_LIMITED, like a limited
// attempt the policy no longer retries. It reports whether it did.
func (dc *decider) limitedOut(f *projection.Flow, t *projection.Task) (bool, error) {
	since := dc.attemptRun(f, t).limitedSince
	if w := t.Waiting(); w != nil && len(w.Cooldowns) > 0 && (since.IsZero() || w.Since.Before(since)) {
		since = w.Since
	}
	retry := policy.DefaultRetry()
	if t.Plan != nil {
		retry = t.Plan.Retry
	}
	if since.IsZero() || dc.now.Before(since.Add(retry.LimitWait())) {
		return false, nil
	}
	reason := fmt.Sprintf("rate limited since %s, for %s: retry.rate_limit_wait is %s", stamp(since), dc.now.Sub(since).Round(time.Second), retry.LimitWait())
	if w := t.Waiting(); w != nil {
		reason += " (" + w.Reason + ")"
	}
	key := fmt.Sprintf("%s/%s:limited:r%d", f.ID, t.ID, t.Round)
	return true, dc.add(key, event.TaskFailed, f.ID, t.ID, "", event.TaskFailedData{Reason: clip(reason, 1000), Class: drovertype.ClassRateLimited})
}
