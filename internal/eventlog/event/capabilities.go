package event

// RuntimeCapabilitiesEvaluated records, before runtime_started, what the
// attempt's runtime can do and how it is bounded (docs/runtimes.md#the-native-runtime),
// for every attempt, CLI or native. It is observational: the fold records
// it as the attempt's phase, as every lifecycle event, and nothing else.
const RuntimeCapabilitiesEvaluated Type = "runtime_capabilities_evaluated"

// RuntimeCapabilitiesEvaluatedData is its payload. The first fields are
// every adapter's capabilities (adapter.Capabilities); the rest say what a native
// runtime adds: the model it talks to, the tools it offers, whether scope
// is enforced before a change (prevented) or found after it (detected),
// and its budget.
type RuntimeCapabilitiesEvaluatedData struct {
	Runtime                     string   `json:"runtime"`
	Adapter                     string   `json:"adapter"` // command | native
	SupportsModel               bool     `json:"supports_model"`
	SupportsNonInteractive      bool     `json:"supports_non_interactive"`
	SupportsPromptFileInclusion bool     `json:"supports_prompt_file_inclusion"`
	AvailableModels             []string `json:"available_models,omitempty"`

	Provider string   `json:"provider,omitempty"` // anthropic | openai-responses | openai-chat
	Model    string   `json:"model,omitempty"`
	BaseURL  string   `json:"base_url,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	// ScopeEnforcement is "prevented" when every change goes through a
	// tool that checks the task's scope first (the native runtime's file
	// tools), "detected" when only the check after the run finds it.
	ScopeEnforcement string        `json:"scope_enforcement"`
	Budget           *BudgetLimits `json:"budget,omitempty"`
}

// BudgetLimits are a native attempt's bounds; zero is no bound.
type BudgetLimits struct {
	Turns        int   `json:"turns,omitempty"`
	Tokens       int64 `json:"tokens,omitempty"`
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	TimeMS       int64 `json:"time_ms,omitempty"`
}
