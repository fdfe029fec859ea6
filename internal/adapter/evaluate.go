package adapter

import "time"

// Evaluator is implemented by adapters that say more about an attempt's
// runtime than their Capabilities, before it starts: which model API and
// tools it uses, how the task's scope is enforced, its budget.
type Evaluator interface {
	Evaluate(model string) Evaluation
}

// Evaluate is what ad says about an attempt asking for model: its
// Evaluation, or for an adapter that is no Evaluator its capabilities, the
// model asked for and scope found after the run.
func Evaluate(ad Adapter, model string) Evaluation {
	if ev, ok := ad.(Evaluator); ok {
		return ev.Evaluate(model)
	}
	return Evaluation{Capabilities: ad.Capabilities(), Model: model, ScopeEnforcement: ScopeDetected}
}

// Evaluation is what a runtime can do for one attempt and how it is
// bounded; the attempt records it as runtime_capabilities_evaluated.
type Evaluation struct {
	Capabilities
	// Provider, BaseURL: the model API a native runtime talks to.
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	// Model is the model the attempt asks for, or the configured one.
	Model string `json:"model,omitempty"`
	// Tools are the tools a native runtime offers the model.
	Tools            []string         `json:"tools,omitempty"`
	ScopeEnforcement ScopeEnforcement `json:"scope_enforcement"`
	// Budget bounds a native runtime's attempt; nil for a CLI.
	Budget *Budget `json:"budget,omitempty"`
}

// ScopeEnforcement says how a task's scope holds.
type ScopeEnforcement string

const (
	// ScopePrevented: every change goes through a tool that checks the
	// scope first, so a change outside it never happens.
	ScopePrevented ScopeEnforcement = "prevented"
	// ScopeDetected: the check after the run finds a change outside the
	// scope, and the result is refused.
	ScopeDetected ScopeEnforcement = "detected"
)

// Budget bounds one attempt of a native runtime; a zero field is no
// bound. Each bound reached ends the attempt with its own error class.
type Budget struct {
	Turns        int           `json:"turns,omitempty"`
	Tokens       int64         `json:"tokens,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty"`
	Time         time.Duration `json:"time_ns,omitempty"`
}
