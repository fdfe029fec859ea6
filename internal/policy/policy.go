package policy

import (
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

// neverRetried are the classes Decide never retries, even when a policy
// lists them in retry_on: an operator's cancellation is final, a merge
// conflict between dependencies will not resolve itself by running again,
// and a spent budget is raised by an operator, not by waiting.
func neverRetried(class drovertype.ErrorClass) bool {
	return class == drovertype.ClassCancelled || class == drovertype.ClassMergeConflict ||
		class == drovertype.ClassBudgetExceeded
}

// Retry is a retry policy. Its JSON form is used inside events, so it is a
// wire format.
type Retry struct {
	// MaxAttempts is the total number of attempts of a task, across
	// runtimes: 3 means the first attempt and at most two more.
	MaxAttempts int `json:"max_attempts"`
	// InitialBackoff is the delay before the second attempt of a same-runtime
	// retry; each further failure multiplies it by Coefficient, up to
	// MaxBackoff.
	InitialBackoff flow.Duration `json:"initial_backoff"`
	Coefficient    float64       `json:"coefficient"`
	// MaxBackoff caps every delay, including one the CLI asked for.
	MaxBackoff flow.Duration `json:"max_backoff"`
	// Jitter spreads a computed backoff by ± this fraction of it; it is
	// clamped to [0, 1].
	Jitter float64 `json:"jitter"`
	// RetryOn lists the classes retried on the same runtime.
	RetryOn []drovertype.ErrorClass `json:"retry_on"`
	// Fallback lists runtimes tried, in order, after the task's own runtime
	// is rate limited, refuses its credentials or finds no worker.
	Fallback []string `json:"fallback,omitempty"`
	// RateLimitWait bounds how long a task may go on meeting rate limits
	// (its attempts limited or withdrawn by a cooldown one after the
	// other, or waiting for one) before it fails RATE_LIMITED: attempts
	// that meet a limit do not count against MaxAttempts. Zero means the
	// default, 2h (plans recorded before it existed have none).
	RateLimitWait flow.Duration `json:"rate_limit_wait,omitempty"`
}

// DefaultRateLimitWait is RateLimitWait's default.
const DefaultRateLimitWait = 2 * time.Hour

// LimitWait is how long a task may wait out rate limits under r.
func (r Retry) LimitWait() time.Duration {
	if r.RateLimitWait <= 0 {
		return DefaultRateLimitWait
	}
	return time.Duration(r.RateLimitWait)
}

// DefaultRetry returns the built-in policy: three attempts, backoff from 10s
// doubling up to 5m with ±20% jitter, retrying the transient classes, no
// fallback runtime, and rate limits waited out for up to 2h.
func DefaultRetry() Retry {
	return Retry{
		MaxAttempts:    3,
		InitialBackoff: flow.Duration(10 * time.Second),
		Coefficient:    2,
		MaxBackoff:     flow.Duration(5 * time.Minute),
		Jitter:         0.2,
		RetryOn: []drovertype.ErrorClass{
			drovertype.ClassRateLimited,
			drovertype.ClassTimeout,
			drovertype.ClassConnectionFailed,
			drovertype.ClassWorkerLost,
			drovertype.ClassVerificationFailed,
			drovertype.ClassPrepareFailed,
			drovertype.ClassObserveFailed,
		},
		RateLimitWait: flow.Duration(DefaultRateLimitWait),
	}
}

// JSON names of Retry's fields, in declaration order.
const (
	fieldMaxAttempts    = "max_attempts"
	fieldInitialBackoff = "initial_backoff"
	fieldCoefficient    = "coefficient"
	fieldMaxBackoff     = "max_backoff"
	fieldJitter         = "jitter"
	fieldRetryOn        = "retry_on"
	fieldFallback       = "fallback"
	fieldRateLimitWait  = "rate_limit_wait"
)

var retryFields = []string{
	fieldMaxAttempts, fieldInitialBackoff, fieldCoefficient, fieldMaxBackoff,
	fieldJitter, fieldRetryOn, fieldFallback, fieldRateLimitWait,
}

// Overlay returns r with the fields s sets applied, and the JSON names of
// those fields in declaration order. A nil pointer or an empty list is
// unset; a nil s sets nothing. The result shares no slice with r or s.
func (r Retry) Overlay(s *flow.RetrySpec) (Retry, []string) {
	out := r
	out.RetryOn = slices.Clone(r.RetryOn)
	out.Fallback = slices.Clone(r.Fallback)
	if s == nil {
		return out, nil
	}
	var set []string
	if s.MaxAttempts != nil {
		out.MaxAttempts = *s.MaxAttempts
		set = append(set, fieldMaxAttempts)
	}
	if s.InitialBackoff != nil {
		out.InitialBackoff = *s.InitialBackoff
		set = append(set, fieldInitialBackoff)
	}
	if s.Coefficient != nil {
		out.Coefficient = *s.Coefficient
		set = append(set, fieldCoefficient)
	}
	if s.MaxBackoff != nil {
		out.MaxBackoff = *s.MaxBackoff
		set = append(set, fieldMaxBackoff)
	}
	if s.Jitter != nil {
		out.Jitter = *s.Jitter
		set = append(set, fieldJitter)
	}
	if len(s.RetryOn) > 0 {
		out.RetryOn = slices.Clone(s.RetryOn)
		set = append(set, fieldRetryOn)
	}
	if len(s.Fallback) > 0 {
		out.Fallback = slices.Clone(s.Fallback)
		set = append(set, fieldFallback)
	}
	if s.RateLimitWait != nil {
		out.RateLimitWait = *s.RateLimitWait
		set = append(set, fieldRateLimitWait)
	}
	return out, set
}

// Level names a level of resolution.
type Level string

// Levels of resolution, highest priority first.
const (
	LevelTask    Level = "task"
	LevelFlow    Level = "flow"
	LevelProject Level = "project"
	LevelGlobal  Level = "global"
	LevelBuiltin Level = "builtin"
)
