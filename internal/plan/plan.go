package plan

import (
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

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

// Choice is a resolved runtime of one role.
type Choice struct {
	Name  string   `json:"name"`
	Model string   `json:"model,omitempty"`
	Args  []string `json:"args,omitempty"`
	// From is the level that named the runtime; builtin when none did.
	From Level `json:"from"`
}

// Resolved is the effective configuration of one task, with the level each
// part came from. It travels inside events.
type Resolved struct {
	Worker Choice `json:"worker"`
	// Validator is nil when no level names a validator runtime.
	Validator *Choice `json:"validator,omitempty"`
	Review    bool    `json:"review,omitempty"`
	// Timeout is 0 and TimeoutFrom "" when no level sets a timeout.
	Timeout     flow.Duration `json:"timeout,omitempty"`
	TimeoutFrom Level         `json:"timeout_from,omitempty"`
	Retry       Retry         `json:"retry"`
	// RetryFrom maps every Retry JSON field name to the level that set it;
	// unset fields map to builtin.
	RetryFrom map[string]Level `json:"retry_from"`
	// Scope is nil and ScopeFrom "" when no level sets a scope.
	Scope     *flow.Scope `json:"scope,omitempty"`
	ScopeFrom Level       `json:"scope_from,omitempty"`
	// PlacementTimeout is how long an attempt may wait while no live
	// worker serves its runtime in its pool before it ends NO_WORKER
	// (Placement reads it: plans recorded before it existed have none).
	PlacementTimeout     flow.Duration `json:"placement_timeout,omitempty"`
	PlacementTimeoutFrom Level         `json:"placement_timeout_from,omitempty"`
}

// DefaultPlacementTimeout is the built-in placement timeout.
const DefaultPlacementTimeout = 10 * time.Minute

// Placement is the plan's placement timeout, the built-in one when it has
// none.
func (r *Resolved) Placement() time.Duration {
	if r == nil || r.PlacementTimeout <= 0 {
		return DefaultPlacementTimeout
	}
	return time.Duration(r.PlacementTimeout)
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
