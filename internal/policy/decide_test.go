package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	same     = drovertype.StrategySameRuntime
	fallback = drovertype.StrategyFallback
)

// with returns DefaultRetry changed by fn.
func with(fn func(*Retry)) Retry {
	r := DefaultRetry()
	fn(&r)
	return r
}

func dur(d time.Duration) flow.Duration { return flow.Duration(d) }

func TestDecide(t *testing.T) {
	def := DefaultRetry()
	chain := with(func(r *Retry) { r.Fallback = []string{"codex", "gemini"} })
	exact := with(func(r *Retry) { r.Jitter = 0; r.MaxAttempts = 10 }) // no jitter: delays are exact
	exactChain := with(func(r *Retry) { r.Jitter = 0; r.Fallback = []string{"codex", "gemini"} })
	noRateRetry := with(func(r *Retry) {
		r.Fallback = []string{"codex"}
		r.RetryOn = []drovertype.ErrorClass{drovertype.ClassTimeout}
	})
	everything := with(func(r *Retry) { r.RetryOn = drovertype.Classes() })
	messy := with(func(r *Retry) { r.Jitter = 0; r.Fallback = []string{"claude", "", "codex", "codex"} })

	type want struct {
		retry    bool
		strategy drovertype.Strategy
		runtime  string
		model    string
		delay    time.Duration // exact, unless jitter is set
		jitter   bool          // delay is a jittered backoff: check ±20% of delay
		reason   string        // a substring of the reason
	}
	fail := func(reason string) want { return want{reason: reason} }
	f := func(class drovertype.ErrorClass, attempts int, runtime, model string) Failure {
		return Failure{Class: class, Attempts: attempts, Runtime: runtime, Model: model}
	}

	tests := []struct {
		name string
		r    Retry
		f    Failure
		want want
	}{
		// Every class, first attempt, default policy.
		{"crashed", def, f(drovertype.ClassCrashed, 1, "claude", "opus"), fail("RUNTIME_CRASHED on claude is not retryable")},
		{"timeout", def, f(drovertype.ClassTimeout, 1, "claude", "opus"), want{true, same, "claude", "opus", 10 * time.Second, true, "RUNTIME_TIMEOUT on claude: retry as attempt 2 of 3 after"}},
		{"connection failed", def, f(drovertype.ClassConnectionFailed, 1, "claude", "opus"), want{true, same, "claude", "opus", 10 * time.Second, true, "attempt 2 of 3"}},
		{"output malformed", def, f(drovertype.ClassOutputMalformed, 1, "claude", "opus"), fail("not retryable (not in retry_on)")},
		{"runtime error", def, f(drovertype.ClassRuntimeError, 1, "claude", "opus"), fail("not retryable")},
		{"rate limited without fallback", def, f(drovertype.ClassRateLimited, 1, "claude", "opus"), want{true, same, "claude", "opus", 10 * time.Second, true, "RATE_LIMITED on claude: retry"}},
		{"auth failed without fallback", def, f(drovertype.ClassAuthFailed, 1, "claude", "opus"), fail("AUTH_FAILED on claude is not retryable and no fallback runtime is left")},
		{"prepare failed", def, f(drovertype.ClassPrepareFailed, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, true, "PREPARE_FAILED"}},
		{"merge conflict", def, f(drovertype.ClassMergeConflict, 1, "claude", ""), fail("MERGE_CONFLICT on claude is never retried")},
		{"observe failed", def, f(drovertype.ClassObserveFailed, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, true, "OBSERVE_FAILED"}},
		{"verification failed", def, f(drovertype.ClassVerificationFailed, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, true, "VERIFICATION_FAILED"}},
		{"scope violation", def, f(drovertype.ClassScopeViolation, 1, "claude", ""), fail("SCOPE_VIOLATION on claude is not retryable")},
		{"cancelled", def, f(drovertype.ClassCancelled, 1, "claude", ""), fail("CANCELLED on claude is never retried")},
		{"worker lost", def, f(drovertype.ClassWorkerLost, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, true, "WORKER_LOST"}},
		{"unclassified", def, f("", 1, "claude", ""), fail("unclassified failure on claude is not retryable")},
		{"unknown class", def, f("SOMETHING_NEW", 1, "claude", ""), fail("SOMETHING_NEW on claude is not retryable")},

		// Never retried even when listed.
		{"cancelled listed", everything, f(drovertype.ClassCancelled, 1, "claude", ""), fail("CANCELLED on claude is never retried")},
		{"merge conflict listed", everything, f(drovertype.ClassMergeConflict, 1, "claude", ""), fail("MERGE_CONFLICT on claude is never retried")},
		{"budget exceeded listed", everything, f(drovertype.ClassBudgetExceeded, 1, "claude", ""), fail("BUDGET_EXCEEDED on claude is never retried")},
		{"crashed listed", everything, f(drovertype.ClassCrashed, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, true, "RUNTIME_CRASHED"}},
		{"cancelled beats exhausted", def, f(drovertype.ClassCancelled, 3, "claude", ""), fail("CANCELLED on claude is never retried")},

		// The budget.
		{"exhausted", def, f(drovertype.ClassTimeout, 3, "claude", ""), fail("attempts exhausted: 3 of 3 (last failure: RUNTIME_TIMEOUT on claude)")},
		{"over budget", def, f(drovertype.ClassTimeout, 4, "claude", ""), fail("attempts exhausted: 4 of 3")},
		{"last attempt left", def, f(drovertype.ClassTimeout, 2, "claude", ""), want{true, same, "claude", "", 20 * time.Second, true, "attempt 3 of 3"}},
		{"exhausted beats fallback", chain, f(drovertype.ClassRateLimited, 3, "claude", "opus"), fail("attempts exhausted: 3 of 3")},
		{"single attempt", with(func(r *Retry) { r.MaxAttempts = 1 }), f(drovertype.ClassTimeout, 1, "claude", ""), fail("attempts exhausted: 1 of 1")},
		{"zero budget", with(func(r *Retry) { r.MaxAttempts = 0 }), f(drovertype.ClassTimeout, 1, "claude", ""), fail("attempts exhausted: 1 of 0")},

		// The fallback chain claude → codex → gemini.
		{"rate limited on primary", chain, f(drovertype.ClassRateLimited, 1, "claude", "opus"), want{true, fallback, "codex", "", 0, false, "RATE_LIMITED on claude: falling back to codex (1 of 3 attempts used)"}},
		{"rate limited on second", chain, f(drovertype.ClassRateLimited, 2, "codex", "o3"), want{true, fallback, "gemini", "", 0, false, "falling back to gemini (2 of 3 attempts used)"}},
		{"rate limited on last retries in place", exactChain, f(drovertype.ClassRateLimited, 2, "gemini", "pro"), want{true, same, "gemini", "pro", 20 * time.Second, false, "RATE_LIMITED on gemini: retry after 20s; it used no attempt (2 of 3 used), rate limits are waited out for up to 2h0m0s"}},
		{"rate limited on last, not retried", noRateRetry, f(drovertype.ClassRateLimited, 2, "codex", ""), fail("RATE_LIMITED on codex is not retryable (not in retry_on)")},
		{"rate limited falls back though not in retry_on", noRateRetry, f(drovertype.ClassRateLimited, 1, "claude", ""), want{true, fallback, "codex", "", 0, false, "falling back to codex"}},
		{"auth failed on primary", chain, f(drovertype.ClassAuthFailed, 1, "claude", "opus"), want{true, fallback, "codex", "", 0, false, "AUTH_FAILED on claude: falling back to codex"}},
		{"auth failed on last", chain, f(drovertype.ClassAuthFailed, 2, "gemini", ""), fail("AUTH_FAILED on gemini is not retryable and no fallback runtime is left")},
		{"auth failed listed, on last", with(func(r *Retry) { r.RetryOn = drovertype.Classes(); r.Fallback = []string{"codex"} }), f(drovertype.ClassAuthFailed, 1, "codex", ""), fail("no fallback runtime is left")},
		{"sandbox denied on primary", chain, f(drovertype.ClassSandboxDenied, 1, "claude", "opus"), want{true, fallback, "codex", "", 0, false, "SANDBOX_DENIED on claude: falling back to codex"}},
		{"sandbox denied without fallback", def, f(drovertype.ClassSandboxDenied, 1, "claude", "opus"), fail("SANDBOX_DENIED on claude is not retryable and no fallback runtime is left")},
		{"sandbox denied listed, on last", with(func(r *Retry) { r.RetryOn = drovertype.Classes(); r.Fallback = []string{"codex"} }), f(drovertype.ClassSandboxDenied, 1, "codex", ""), fail("no fallback runtime is left")},
		{"timeout does not fall back", exactChain, f(drovertype.ClassTimeout, 1, "claude", "opus"), want{true, same, "claude", "opus", 10 * time.Second, false, "after 10s"}},
		{"runtime not in chain falls back to primary", chain, f(drovertype.ClassRateLimited, 1, "aider", "x"), want{true, fallback, "claude", "opus", 0, false, "RATE_LIMITED on aider: falling back to claude"}},
		{"runtime not in chain, no fallback list", def, f(drovertype.ClassAuthFailed, 1, "aider", ""), want{true, fallback, "claude", "opus", 0, false, "falling back to claude"}},
		{"unknown runtime is the primary", chain, f(drovertype.ClassRateLimited, 1, "", ""), want{true, fallback, "codex", "", 0, false, "RATE_LIMITED on claude: falling back to codex"}},
		{"unknown runtime retries the primary", exact, f(drovertype.ClassTimeout, 1, "", ""), want{true, same, "claude", "opus", 10 * time.Second, false, "RUNTIME_TIMEOUT on claude"}},
		{"duplicates and primary dropped", messy, f(drovertype.ClassRateLimited, 1, "claude", ""), want{true, fallback, "codex", "", 0, false, "falling back to codex"}},
		{"duplicates: codex is last", messy, f(drovertype.ClassRateLimited, 2, "codex", ""), want{true, same, "codex", "", 20 * time.Second, false, "retry after 20s; it used no attempt"}},

		// Rate limits are waited out for a time, not a number of attempts.
		{"limited for the whole wait", def, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", LimitedSince: now.Add(-2 * time.Hour)},
			fail("RATE_LIMITED on claude: rate limited since 2025-06-01T10:00:00Z, for 2h0m0s: retry.rate_limit_wait is 2h0m0s")},
		{"limited just under the wait", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", LimitedSince: now.Add(-119 * time.Minute)},
			want{true, same, "claude", "", 10 * time.Second, false, "retry after 10s; it used no attempt (1 of 10 used)"}},
		{"limited past a shorter wait", with(func(r *Retry) { r.RateLimitWait = dur(10 * time.Minute) }), Failure{Class: drovertype.ClassRateLimited, Runtime: "claude", LimitedSince: now.Add(-10 * time.Minute)},
			fail("retry.rate_limit_wait is 10m0s")},
		{"zero wait is the default", with(func(r *Retry) { r.RateLimitWait = 0; r.Jitter = 0 }), Failure{Class: drovertype.ClassRateLimited, Runtime: "claude", LimitedSince: now.Add(-time.Hour)},
			want{true, same, "claude", "", 10 * time.Second, false, "waited out for up to 2h0m0s"}},
		{"limited since later than now is now", exact, Failure{Class: drovertype.ClassRateLimited, Runtime: "claude", LimitedSince: now.Add(time.Hour)},
			want{true, same, "claude", "", 10 * time.Second, false, "retry after 10s"}},
		{"quota resets past the wait", exact, Failure{Class: drovertype.ClassRateLimited, Runtime: "claude", ResetAt: now.Add(3 * time.Hour)},
			fail("the quota resets at 2025-06-01T15:00:00Z, past retry.rate_limit_wait (2h0m0s since 2025-06-01T12:00:00Z)")},
		{"the wait beats the fallback", chain, Failure{Class: drovertype.ClassRateLimited, Runtime: "claude", LimitedSince: now.Add(-3 * time.Hour)},
			fail("rate limited since 2025-06-01T09:00:00Z")},
		{"the wait is only for rate limits", exact, Failure{Class: drovertype.ClassTimeout, Attempts: 1, Runtime: "claude", LimitedSince: now.Add(-3 * time.Hour)},
			want{true, same, "claude", "", 10 * time.Second, false, "retry as attempt 2 of 10"}},

		// No worker took the attempt: the next runtime at once.
		{"no worker on primary", chain, f(drovertype.ClassNoWorker, 0, "claude", "opus"), want{true, fallback, "codex", "", 0, false, "NO_WORKER on claude: falling back to codex (0 of 3 attempts used)"}},
		{"no worker on last", chain, f(drovertype.ClassNoWorker, 1, "gemini", ""), fail("NO_WORKER on gemini is not retryable and no fallback runtime is left")},
		{"no worker without fallback", def, f(drovertype.ClassNoWorker, 0, "claude", "opus"), fail("NO_WORKER on claude is not retryable and no fallback runtime is left")},
		{"no worker listed waits again", with(func(r *Retry) { r.Jitter = 0; r.RetryOn = []drovertype.ErrorClass{drovertype.ClassNoWorker} }), f(drovertype.ClassNoWorker, 0, "claude", "opus"),
			want{true, same, "claude", "opus", 10 * time.Second, false, "NO_WORKER on claude: retry after 10s; it used no attempt (0 of 3 used)"}},

		// Delays the CLI asked for.
		{"reset before max backoff", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(90 * time.Second)}, want{true, same, "claude", "", 90 * time.Second, false, "after 1m30s (the quota resets at 2025-06-01T12:01:30Z)"}},
		{"reset after max backoff", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(time.Hour)}, want{true, same, "claude", "", 5 * time.Minute, false, "after 5m0s (the quota resets at 2025-06-01T13:00:00Z, capped by max_backoff)"}},
		{"reset in the past", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(-time.Minute)}, want{true, same, "claude", "", 10 * time.Second, false, "after 10s"}},
		{"reset in the past, retry-after", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(-time.Minute), RetryAfter: 42 * time.Second}, want{true, same, "claude", "", 42 * time.Second, false, "(the CLI asked to wait 42s)"}},
		{"reset beats retry-after", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(time.Minute), RetryAfter: 42 * time.Second}, want{true, same, "claude", "", time.Minute, false, "quota resets"}},
		{"reset rounds up to ms", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(1500 * time.Microsecond)}, want{true, same, "claude", "", 2 * time.Millisecond, false, "after 2ms"}},
		{"reset ignored for other classes", exact, Failure{Class: drovertype.ClassTimeout, Attempts: 1, Runtime: "claude", ResetAt: now.Add(time.Minute)}, want{true, same, "claude", "", 10 * time.Second, false, "after 10s"}},
		{"retry-after", exact, Failure{Class: drovertype.ClassTimeout, Attempts: 2, Runtime: "claude", RetryAfter: 30 * time.Second}, want{true, same, "claude", "", 30 * time.Second, false, "after 30s (the CLI asked to wait 30s)"}},
		{"retry-after over max backoff", exact, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", RetryAfter: time.Hour}, want{true, same, "claude", "", 5 * time.Minute, false, "asked to wait 1h0m0s, capped by max_backoff)"}},
		{"retry-after is not jittered", def, Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", RetryAfter: 7 * time.Second}, want{true, same, "claude", "", 7 * time.Second, false, "after 7s"}},

		// Backoff growth and cap.
		{"backoff 1", exact, f(drovertype.ClassTimeout, 1, "claude", ""), want{true, same, "claude", "", 10 * time.Second, false, "after 10s"}},
		{"backoff 2", exact, f(drovertype.ClassTimeout, 2, "claude", ""), want{true, same, "claude", "", 20 * time.Second, false, "after 20s"}},
		{"backoff 3", exact, f(drovertype.ClassTimeout, 3, "claude", ""), want{true, same, "claude", "", 40 * time.Second, false, "after 40s"}},
		{"backoff 5", exact, f(drovertype.ClassTimeout, 5, "claude", ""), want{true, same, "claude", "", 160 * time.Second, false, "after 2m40s"}},
		{"backoff capped", exact, f(drovertype.ClassTimeout, 6, "claude", ""), want{true, same, "claude", "", 5 * time.Minute, false, "after 5m0s"}},
		{"backoff capped with jitter", with(func(r *Retry) { r.MaxAttempts = 100 }), f(drovertype.ClassTimeout, 60, "claude", ""), want{true, same, "claude", "", 5 * time.Minute, true, ""}},
		{"coefficient 1.5", with(func(r *Retry) { r.Jitter = 0; r.Coefficient = 1.5 }), f(drovertype.ClassTimeout, 2, "claude", ""), want{true, same, "claude", "", 15 * time.Second, false, "after 15s"}},
		{"coefficient 1 is constant", with(func(r *Retry) { r.Jitter = 0; r.Coefficient = 1; r.MaxAttempts = 9 }), f(drovertype.ClassTimeout, 8, "claude", ""), want{true, same, "claude", "", 10 * time.Second, false, "after 10s"}},
		{"huge exponent", with(func(r *Retry) { r.Jitter = 0; r.MaxAttempts = 1 << 30 }), f(drovertype.ClassTimeout, 1<<29, "claude", ""), want{true, same, "claude", "", 5 * time.Minute, false, "after 5m0s"}},
		{"zero max backoff", with(func(r *Retry) { r.MaxBackoff = 0 }), Failure{Class: drovertype.ClassRateLimited, Attempts: 1, Runtime: "claude", ResetAt: now.Add(time.Minute)}, want{true, same, "claude", "", 0, false, "after 0s"}},
		{"max below initial", with(func(r *Retry) { r.Jitter = 0; r.MaxBackoff = dur(3 * time.Second) }), f(drovertype.ClassTimeout, 1, "claude", ""), want{true, same, "claude", "", 3 * time.Second, false, "after 3s"}},
		{"zero attempts counts as the first", exact, f(drovertype.ClassTimeout, 0, "claude", ""), want{true, same, "claude", "", 10 * time.Second, false, "attempt 1 of 10"}},
		{"negative coefficient", with(func(r *Retry) { r.Jitter = 0; r.Coefficient = -2 }), f(drovertype.ClassTimeout, 2, "claude", ""), want{true, same, "claude", "", 0, false, "after 0s"}},
	}
	if len(tests) < 25 {
		t.Fatalf("only %d rows", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.r, "claude", "opus", tt.f, now, "attempt-"+tt.name)
			w := tt.want
			if d.Retry != w.retry || d.Strategy != w.strategy || d.Runtime != w.runtime || d.Model != w.model {
				t.Errorf("Decide = %+v\nwant retry=%v strategy=%q runtime=%q model=%q", d, w.retry, w.strategy, w.runtime, w.model)
			}
			if w.jitter {
				lo := time.Duration(float64(w.delay) * 0.8)
				hi := min(time.Duration(float64(w.delay)*1.2), time.Duration(tt.r.MaxBackoff))
				if d.Delay < lo || d.Delay > hi {
					t.Errorf("Delay = %v, want in [%v, %v]", d.Delay, lo, hi)
				}
			} else if d.Delay != w.delay {
				t.Errorf("Delay = %v, want %v", d.Delay, w.delay)
			}
			if d.Delay%time.Millisecond != 0 {
				t.Errorf("Delay = %v, not whole milliseconds", d.Delay)
			}
			if !strings.Contains(d.Reason, w.reason) {
				t.Errorf("Reason = %q, want it to contain %q", d.Reason, w.reason)
			}
			if !d.Retry && (d.Strategy != "" || d.Runtime != "" || d.Delay != 0) {
				t.Errorf("no retry, yet %+v", d)
			}
			if d.Retry && !strings.Contains(d.Reason, d.Runtime) {
				t.Errorf("Reason %q does not name the next runtime %q", d.Reason, d.Runtime)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	for _, c := range drovertype.Classes() {
		want := c != drovertype.ClassRateLimited && c != drovertype.ClassNoWorker
		if Counts(c) != want {
			t.Errorf("Counts(%s) = %t", c, Counts(c))
		}
	}
}

func TestDecideJitter(t *testing.T) {
	r := DefaultRetry()
	r.MaxAttempts = 10
	f := Failure{Class: drovertype.ClassTimeout, Attempts: 2, Runtime: "claude"}
	base := 20 * time.Second
	lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
	seen := map[time.Duration]bool{}
	var below, above int
	for i := range 1000 {
		seed := fmt.Sprintf("flow/task/%d", i)
		d := Decide(r, "claude", "", f, now, seed)
		if d.Delay < lo || d.Delay > hi {
			t.Fatalf("seed %q: Delay %v outside [%v, %v]", seed, d.Delay, lo, hi)
		}
		// Re-deriving the decision (after a restart, at another time)
		// gives the same delay.
		if again := Decide(r, "claude", "", f, now.Add(time.Hour), seed); again != d {
			t.Fatalf("seed %q: %+v, then %+v", seed, d, again)
		}
		seen[d.Delay] = true
		if d.Delay < base {
			below++
		} else if d.Delay > base {
			above++
		}
	}
	// Seeds that differ only in their last bytes still spread out.
	if len(seen) < 500 {
		t.Errorf("1000 seeds gave only %d distinct delays", len(seen))
	}
	if below < 400 || above < 400 {
		t.Errorf("jitter is lopsided: %d below, %d above %v", below, above, base)
	}
	a := Decide(r, "claude", "", f, now, "attempt-1").Delay
	b := Decide(r, "claude", "", f, now, "attempt-2").Delay
	if a == b {
		t.Errorf("seeds attempt-1 and attempt-2 give the same delay %v", a)
	}
}

func TestDecideJitterBounds(t *testing.T) {
	for _, j := range []float64{-1, 0, 0.5, 1, 3} {
		r := DefaultRetry()
		r.Jitter = j
		jj := min(max(j, 0), 1)
		lo, hi := time.Duration(float64(10*time.Second)*(1-jj)), time.Duration(float64(10*time.Second)*(1+jj))
		for i := range 200 {
			d := Decide(r, "claude", "", Failure{Class: drovertype.ClassTimeout, Attempts: 1, Runtime: "claude"}, now, fmt.Sprint(i)).Delay
			if d < lo || d > hi {
				t.Fatalf("jitter %v: delay %v outside [%v, %v]", j, d, lo, hi)
			}
		}
	}
}

func TestUnit(t *testing.T) {
	for _, s := range []string{"", "a", "attempt-1", strings.Repeat("x", 1000)} {
		if u := unit(s); u < 0 || u >= 1 {
			t.Errorf("unit(%q) = %v", s, u)
		}
		if unit(s) != unit(s) {
			t.Errorf("unit(%q) is not deterministic", s)
		}
	}
}
