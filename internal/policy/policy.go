package policy

import (
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/plan"
)

// neverRetried are the classes Decide never retries, even when a policy
// lists them in retry_on: an operator's cancellation is final, a merge
// conflict between dependencies will not resolve itself by running again,
// and a spent budget is raised by an operator, not by waiting.
func neverRetried(class drovertype.ErrorClass) bool {
	return class == drovertype.ClassCancelled || class == drovertype.ClassMergeConflict ||
		class == drovertype.ClassBudgetExceeded
}

// Retry is a retry policy (package plan's, which holds its wire form).
type Retry = plan.Retry

// DefaultRateLimitWait is RateLimitWait's default.
const DefaultRateLimitWait = plan.DefaultRateLimitWait

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

// overlay returns r with the fields s sets applied, and the JSON names of
// those fields in declaration order. A nil pointer or an empty list is
// unset; a nil s sets nothing. The result shares no slice with r or s.
func overlay(r Retry, s *flow.RetrySpec) (Retry, []string) {
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
type Level = plan.Level

// Levels of resolution, highest priority first.
const (
	LevelTask    = plan.LevelTask
	LevelFlow    = plan.LevelFlow
	LevelProject = plan.LevelProject
	LevelGlobal  = plan.LevelGlobal
	LevelBuiltin = plan.LevelBuiltin
)
