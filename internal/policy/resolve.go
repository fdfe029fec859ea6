package policy

import (
	"slices"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/plan"
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

// Choice is a resolved runtime of one role; Resolved is the effective
// configuration of one task. Their wire form is package plan's: events
// carry them, and the event schema must not import the package deciding.
type (
	Choice   = plan.Choice
	Resolved = plan.Resolved
)

// DefaultPlacementTimeout is the built-in placement timeout.
const DefaultPlacementTimeout = plan.DefaultPlacementTimeout

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
		out.Retry, set = overlay(out.Retry, layers[i].Retry)
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
