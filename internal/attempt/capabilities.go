package attempt

import (
	"context"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// evaluate records, before the runtime starts, what it can do for this
// attempt and how it is bounded: runtime_capabilities_evaluated, naming
// the kind of runtime as Initialize did. A CLI's scope is detected after
// the run; a native runtime's is prevented by its tools.
func (a *run) evaluate(ctx context.Context) error {
	ev := adapter.Evaluate(a.ad, a.job.Model)
	d := event.RuntimeCapabilitiesEvaluatedData{
		Runtime: a.ad.Name(), Adapter: a.info.Adapter,
		SupportsModel: ev.SupportsModel, SupportsNonInteractive: ev.SupportsNonInteractive,
		SupportsPromptFileInclusion: ev.SupportsPromptFileInclusion, AvailableModels: ev.AvailableModels,
		Provider: ev.Provider, Model: ev.Model, BaseURL: ev.BaseURL, Tools: ev.Tools,
		ScopeEnforcement: string(ev.ScopeEnforcement),
	}
	if b := ev.Budget; b != nil {
		d.Budget = &event.BudgetLimits{Turns: b.Turns, Tokens: b.Tokens, InputTokens: b.InputTokens,
			OutputTokens: b.OutputTokens, TimeMS: b.Time.Milliseconds()}
	}
	return a.emit.Emit(ctx, event.RuntimeCapabilitiesEvaluated, "", d)
}
