package policy

import (
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/flow"
)

// Layer is what one level of resolution sets; zero values are unset.
type Layer struct {
	Level Level
	// Runtime is the worker role's runtime. Name "" means this level names
	// no runtime; its Model and Args may still be set and then apply to the
	// runtime a lower level names.
	Runtime flow.RuntimeRef
	// Validator is the validator role's runtime, with the same rule; nil
	// sets nothing.
	Validator *flow.RuntimeRef
	Review    *bool
	Retry     *flow.RetrySpec
	Timeout   flow.Duration
	Scope     *flow.Scope
	// PlacementTimeout is how long an attempt may wait while no live
	// worker serves its runtime; 0 sets nothing.
	PlacementTimeout flow.Duration
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

// Resolve applies layers given highest priority first (task, flow, project,
// global), over the built-in defaults. Priority follows the argument order;
// Layer.Level only labels where a value came from.
//
//   - Runtime name: from the highest layer that names one. Model and Args:
//     each from the highest layer at or above that layer which sets it; a
//     lower layer's model belongs to a different runtime choice and is
//     ignored. When no layer names a runtime, Name is "" and Model and Args
//     come from the highest layer setting them.
//   - Validator: the same rule, over the layers' Validator refs; nil when no
//     layer names one.
//   - Review: from the highest layer that sets it; false by default.
//   - Timeout and Scope: from the highest layer that sets them; Scope is
//     taken as a whole, never merged.
//   - PlacementTimeout: from the highest layer that sets it, else the
//     built-in DefaultPlacementTimeout.
//   - Retry: each field from the highest layer setting it, over DefaultRetry.
//
// The result shares no memory with the layers.
func Resolve(layers ...Layer) Resolved {
	out := Resolved{RetryFrom: make(map[string]Level, len(retryFields))}

	out.Worker, _ = choose(layers, func(l *Layer) *flow.RuntimeRef { return &l.Runtime })
	if v, ok := choose(layers, func(l *Layer) *flow.RuntimeRef { return l.Validator }); ok {
		out.Validator = &v
	}

	for _, l := range layers {
		if l.Review != nil {
			out.Review = *l.Review
			break
		}
	}
	for _, l := range layers {
		if l.Timeout > 0 {
			out.Timeout, out.TimeoutFrom = l.Timeout, l.Level
			break
		}
	}
	out.PlacementTimeout, out.PlacementTimeoutFrom = flow.Duration(DefaultPlacementTimeout), LevelBuiltin
	for _, l := range layers {
		if l.PlacementTimeout > 0 {
			out.PlacementTimeout, out.PlacementTimeoutFrom = l.PlacementTimeout, l.Level
			break
		}
	}
	for _, l := range layers {
		if l.Scope != nil {
			out.Scope = &flow.Scope{Allow: slices.Clone(l.Scope.Allow), Deny: slices.Clone(l.Scope.Deny)}
			out.ScopeFrom = l.Level
			break
		}
	}

	// Retry: overlay from the lowest layer up, so a higher layer's field
	// replaces a lower one's.
	out.Retry = DefaultRetry()
	for _, f := range retryFields {
		out.RetryFrom[f] = LevelBuiltin
	}
	for i := len(layers) - 1; i >= 0; i-- {
		var set []string
		out.Retry, set = out.Retry.Overlay(layers[i].Retry)
		for _, f := range set {
			out.RetryFrom[f] = layers[i].Level
		}
	}
	return out
}

// choose resolves one role's runtime. ok is false when no layer names one.
func choose(layers []Layer, ref func(*Layer) *flow.RuntimeRef) (c Choice, ok bool) {
	top := len(layers) - 1 // the naming layer; the lowest when none names one
	c.From = LevelBuiltin
	for i := range layers {
		if r := ref(&layers[i]); r != nil && r.Name != "" {
			top, ok = i, true
			c.Name, c.From = r.Name, layers[i].Level
			break
		}
	}
	for i := 0; i <= top; i++ {
		r := ref(&layers[i])
		if r == nil {
			continue
		}
		if c.Model == "" && r.Model != "" {
			c.Model = r.Model
		}
		if c.Args == nil && len(r.Args) > 0 {
			c.Args = slices.Clone(r.Args)
		}
	}
	return c, ok
}
