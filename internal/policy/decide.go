package policy

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

// Failure is a failed attempt as the decision function sees it.
type Failure struct {
	Class drovertype.ErrorClass
	// Attempts of the task that count against MaxAttempts, this one
	// included if it counts: those that met a rate limit, found no worker
	// or were withdrawn before they ran do not (Counts).
	Attempts int
	// LimitedSince is when the task began meeting rate limits: the end of
	// the first of its latest attempts, one after the other, that met a
	// limit or were withdrawn by a cooldown (this one included), or the
	// start of its wait for a cooldown before them. Zero: this is the
	// first.
	LimitedSince time.Time
	// Runtime the failed attempt ran on; "" means the primary.
	Runtime string
	Model   string
	// RetryAfter is how long the CLI said to wait (0: unknown).
	RetryAfter time.Duration
	// ResetAt is when the CLI said its quota resets (zero: unknown).
	ResetAt time.Time
}

// Decision is what to do about a failed attempt.
type Decision struct {
	Retry bool
	// Strategy is how, when Retry.
	Strategy drovertype.Strategy
	// Runtime and Model of the next attempt. Model "" means the runtime's
	// default.
	Runtime string
	Model   string
	// Delay before the next attempt, in whole milliseconds.
	Delay time.Duration
	// Reason says why, for people.
	Reason string
}

// Decide is the pure decision function: the same arguments always give the
// same Decision, so a controller that re-derives a decision after a restart
// schedules the same retry.
//
// The runtime chain is primary followed by r.Fallback, without duplicates,
// empty names or the primary again. The rules, in order:
//
//  0. CANCELLED, MERGE_CONFLICT and BUDGET_EXCEEDED are never retried, even
//     when listed in RetryOn.
//  1. RATE_LIMITED met r.LimitWait() or more after f.LimitedSince, or
//     with a quota that resets later than that: no retry. (A rate limit
//     is waited out for a time, not for a number of attempts.)
//  2. f.Attempts >= r.MaxAttempts: attempts exhausted, no retry.
//  3. RATE_LIMITED, AUTH_FAILED, SANDBOX_DENIED or NO_WORKER, with a
//     runtime in the chain after the failed one: fall back to that runtime
//     at once (Delay 0). A failed
//     runtime that is not in the chain (the policy changed, or an operator
//     chose it) sits before the chain, so the next runtime is the primary;
//     a Failure whose Runtime is "" ran on the primary.
//     The next attempt uses primaryModel on the primary, and the runtime's
//     default model on any other.
//  4. AUTH_FAILED or SANDBOX_DENIED otherwise: no retry, even when listed
//     in RetryOn (the same runtime would be refused the same); NO_WORKER
//     otherwise and not in r.RetryOn: no retry.
//  5. Class in r.RetryOn: retry on the same runtime with the same model.
//     The delay is the time until ResetAt for RATE_LIMITED with a reset
//     after now, else RetryAfter when positive, else the backoff
//     InitialBackoff·Coefficient^(Attempts-1), capped by MaxBackoff and
//     spread by Jitter with a factor derived from seed (never from a clock
//     or a random source). The delay is always clamped to [0, MaxBackoff],
//     so a quota resetting later than MaxBackoff waits MaxBackoff.
//  6. Otherwise: no retry.
func Decide(r Retry, primary string, primaryModel string, f Failure, now time.Time, seed string) Decision {
	class := string(f.Class)
	if class == "" {
		class = "unclassified failure"
	}
	failed := f.Runtime
	if failed == "" {
		failed = primary
	}
	where := class
	if failed != "" {
		where += " on " + failed
	}

	if neverRetried(f.Class) {
		return Decision{Reason: where + " is never retried"}
	}
	if why := waitedOut(r, f, now); why != "" {
		return Decision{Reason: where + ": " + why}
	}
	if f.Attempts >= r.MaxAttempts {
		return Decision{Reason: fmt.Sprintf("attempts exhausted: %d of %d (last failure: %s)", f.Attempts, r.MaxAttempts, where)}
	}

	if movesOn(f.Class) {
		chain := runtimeChain(primary, r.Fallback)
		next := slices.Index(chain, failed) + 1 // 0 when not in the chain
		if next < len(chain) {
			d := Decision{Retry: true, Strategy: drovertype.StrategyFallback, Runtime: chain[next]}
			if d.Runtime == primary {
				d.Model = primaryModel
			}
			d.Reason = fmt.Sprintf("%s: falling back to %s (%d of %d attempts used)", where, d.Runtime, f.Attempts, r.MaxAttempts)
			return d
		}
		if f.Class == drovertype.ClassAuthFailed || f.Class == drovertype.ClassSandboxDenied ||
			f.Class == drovertype.ClassNoWorker && !slices.Contains(r.RetryOn, f.Class) {
			return Decision{Reason: where + " is not retryable and no fallback runtime is left"}
		}
	}

	if !slices.Contains(r.RetryOn, f.Class) {
		return Decision{Reason: where + " is not retryable (not in retry_on)"}
	}
	d := Decision{Retry: true, Strategy: drovertype.StrategySameRuntime, Runtime: f.Runtime, Model: f.Model}
	if f.Runtime == "" {
		d.Runtime, d.Model = primary, primaryModel
	}
	var why string
	d.Delay, why = delay(r, f, now, seed)
	if !Counts(f.Class) {
		d.Reason = fmt.Sprintf("%s: retry after %s%s; it used no attempt (%d of %d used)", where, d.Delay, why, f.Attempts, r.MaxAttempts)
		if f.Class == drovertype.ClassRateLimited {
			d.Reason += fmt.Sprintf(", rate limits are waited out for up to %s", r.LimitWait())
		}
		return d
	}
	d.Reason = fmt.Sprintf("%s: retry as attempt %d of %d after %s%s", where, f.Attempts+1, r.MaxAttempts, d.Delay, why)
	return d
}

// movesOn reports whether a failure of class moves the task to the next
// runtime of its chain at once: the runtime's provider refuses it for now,
// its sandbox refuses what the task needs, or no worker runs it.
func movesOn(class drovertype.ErrorClass) bool {
	switch class {
	case drovertype.ClassRateLimited, drovertype.ClassAuthFailed, drovertype.ClassSandboxDenied, drovertype.ClassNoWorker:
		return true
	}
	return false
}

// Counts reports whether an attempt that failed with class counts against
// MaxAttempts: one that met a rate limit is bounded by RateLimitWait
// instead, and one no worker took never ran.
func Counts(class drovertype.ErrorClass) bool {
	return class != drovertype.ClassRateLimited && class != drovertype.ClassNoWorker
}

// waitedOut says why a rate-limited task has waited long enough, "" when
// it may wait on: it has met limits for RateLimitWait, or its quota resets
// later than that.
func waitedOut(r Retry, f Failure, now time.Time) string {
	if f.Class != drovertype.ClassRateLimited {
		return ""
	}
	since := f.LimitedSince
	if since.IsZero() || since.After(now) {
		since = now
	}
	end := since.Add(r.LimitWait())
	switch {
	case !now.Before(end):
		return fmt.Sprintf("rate limited since %s, for %s: retry.rate_limit_wait is %s", stamp(since), now.Sub(since), r.LimitWait())
	case f.ResetAt.After(end):
		return fmt.Sprintf("the quota resets at %s, past retry.rate_limit_wait (%s since %s)", stamp(f.ResetAt), r.LimitWait(), stamp(since))
	}
	return ""
}

// stamp prints a time for a reason: UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// runtimeChain is primary followed by fallback, without empty names and
// duplicates.
func runtimeChain(primary string, fallback []string) []string {
	chain := make([]string, 0, 1+len(fallback))
	for _, name := range append([]string{primary}, fallback...) {
		if name != "" && !slices.Contains(chain, name) {
			chain = append(chain, name)
		}
	}
	return chain
}

// delay is the wait before a same-runtime retry, and a note on where it came
// from for the reason.
func delay(r Retry, f Failure, now time.Time, seed string) (time.Duration, string) {
	maxB := max(time.Duration(r.MaxBackoff), 0)
	var d time.Duration
	var why string
	switch {
	case f.Class == drovertype.ClassRateLimited && f.ResetAt.After(now):
		d = ceilMS(f.ResetAt.Sub(now))
		why = " (the quota resets at " + f.ResetAt.UTC().Format(time.RFC3339) + ")"
	case f.RetryAfter > 0:
		d = ceilMS(f.RetryAfter)
		why = fmt.Sprintf(" (the CLI asked to wait %s)", f.RetryAfter)
	default:
		return backoff(r, f.Attempts, seed), ""
	}
	if d > maxB {
		d = maxB
		why = why[:len(why)-1] + ", capped by max_backoff)"
	}
	return d, why
}

// backoff is InitialBackoff·Coefficient^(k-1) for the k-th failure, capped
// by MaxBackoff, times the jitter factor, clamped to [0, MaxBackoff] and
// rounded to whole milliseconds.
func backoff(r Retry, k int, seed string) time.Duration {
	maxB := float64(max(time.Duration(r.MaxBackoff), 0))
	k = max(k, 1)
	b := float64(r.InitialBackoff) * math.Pow(r.Coefficient, float64(k-1))
	b = clamp(b, maxB)
	j := r.Jitter
	if !(j > 0) { // also NaN
		j = 0
	}
	j = min(j, 1)
	b = clamp(b*(1+j*(2*unit(seed)-1)), maxB)
	d := time.Duration(b).Round(time.Millisecond)
	return min(max(d, 0), time.Duration(maxB))
}

// clamp bounds x to [0, hi]; NaN counts as hi, as it can only come from an
// overflowing or nonsensical policy.
func clamp(x, hi float64) float64 {
	switch {
	case math.IsNaN(x) || x > hi:
		return hi
	case x < 0:
		return 0
	}
	return x
}

// ceilMS rounds d up to whole milliseconds, so a wait for a quota never ends
// early.
func ceilMS(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r > 0 {
		d += time.Millisecond - r
	}
	return d
}

// unit maps seed to [0, 1): the 64-bit FNV-1a hash of seed, finalised with
// the SplitMix64 mixer so that seeds differing only in their last byte (as
// attempt ids do) still land far apart, then its top 53 bits as a fraction.
func unit(seed string) float64 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
