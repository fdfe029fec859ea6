package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// NativeRuntime holds the fields of a runtime with `adapter: native`, which
// runs Drover's own agent loop against a model API instead of a CLI
// (internal/native, docs/runtimes.md). They sit at the runtime's level of
// the file, beside the usual timeout, limits and env.
type NativeRuntime struct {
	// Provider is the API spoken: anthropic (Messages), openai-responses
	// (Responses) or openai-chat (Chat Completions, also served by vLLM,
	// Ollama, OpenRouter and LiteLLM). Required.
	Provider string `mapstructure:"provider"`
	// BaseURL is the API's address as the official SDKs take it: OpenAI's
	// includes /v1, Anthropic's does not. Defaults to
	// https://api.anthropic.com or https://api.openai.com/v1; required for
	// openai-chat.
	BaseURL string `mapstructure:"base_url"`
	// APIKeyEnv names the worker's environment variable that holds the
	// key. Defaults to ANTHROPIC_API_KEY or OPENAI_API_KEY; for
	// openai-chat, none (local servers often need no key).
	APIKeyEnv string `mapstructure:"api_key_env"`
	// MaxTokens bounds the output of one turn. Defaults to 16384.
	MaxTokens int64 `mapstructure:"max_tokens"`
	// MaxRetries is how often a turn that failed transiently (5xx,
	// overloaded, connection lost) is tried again inside the attempt; 0
	// retries nothing. Defaults to 3.
	MaxRetries *int `mapstructure:"max_retries"`
	// CommandTimeout is how long a shell command the model runs may take
	// when it asks for no timeout. Defaults to 2m.
	CommandTimeout time.Duration `mapstructure:"command_timeout"`
	// Budget bounds one attempt; a zero field is no bound.
	Budget NativeBudget `mapstructure:"budget"`
	// Price is what the model costs, for the attempt's cost in its report;
	// zero costs nothing (Drover knows no prices of its own).
	Price NativePrice `mapstructure:"price"`
}

// NativeBudget bounds one native attempt; each bound ends the attempt with
// its own error class when reached. Zero means no bound.
type NativeBudget struct {
	// Turns is the most model calls (retries of a failed call not counted).
	Turns int `mapstructure:"turns"`
	// Tokens bounds input and output tokens together, cached ones included.
	Tokens int64 `mapstructure:"tokens"`
	// InputTokens and OutputTokens bound each direction alone.
	InputTokens  int64 `mapstructure:"input_tokens"`
	OutputTokens int64 `mapstructure:"output_tokens"`
	// Time is the attempt's wall-clock budget, model calls, commands and
	// retry waits together.
	Time time.Duration `mapstructure:"time"`
}

// NativePrice is in US dollars per million tokens.
type NativePrice struct {
	Input      float64 `mapstructure:"input"`
	Output     float64 `mapstructure:"output"`
	CacheRead  float64 `mapstructure:"cache_read"`
	CacheWrite float64 `mapstructure:"cache_write"`
}

// NativeProviders are the values of provider.
var NativeProviders = []string{"anthropic", "openai-responses", "openai-chat"}

// nativeDefaults fills what a native runtime leaves out.
func nativeDefaults(rt *Runtime) {
	n := &rt.NativeRuntime
	switch n.Provider {
	case "anthropic":
		if n.BaseURL == "" {
			n.BaseURL = "https://api.anthropic.com"
		}
		if n.APIKeyEnv == "" {
			n.APIKeyEnv = "ANTHROPIC_API_KEY"
		}
	case "openai-responses":
		if n.BaseURL == "" {
			n.BaseURL = "https://api.openai.com/v1"
		}
		if n.APIKeyEnv == "" {
			n.APIKeyEnv = "OPENAI_API_KEY"
		}
	}
	if n.MaxTokens == 0 {
		n.MaxTokens = 16384
	}
	if n.MaxRetries == nil {
		r := 3
		n.MaxRetries = &r
	}
	if n.CommandTimeout == 0 {
		n.CommandTimeout = 2 * time.Minute
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateNative checks a native runtime's fields, naming each bad one.
func validateNative(key string, rt Runtime, bad func(string, string, ...any)) {
	n := rt.NativeRuntime
	if !slices.Contains(NativeProviders, n.Provider) {
		bad(key+".provider", "must be %s (got %q)", strings.Join(NativeProviders, ", "), n.Provider)
	}
	if rt.Model == "" {
		bad(key+".model", "is required for a native runtime (the model id the API knows, e.g. claude-sonnet-4-5)")
	}
	if n.BaseURL == "" {
		bad(key+".base_url", "is required for provider %s (e.g. http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama)", n.Provider)
	} else if u, err := url.Parse(n.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad(key+".base_url", "must be an http or https URL (got %q)", n.BaseURL)
	} else if u.User != nil {
		bad(key+".base_url", "must not carry credentials; name the key's variable in api_key_env")
	} else if n.Provider == "anthropic" && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") {
		bad(key+".base_url", "is taken as the Anthropic SDK takes it, without /v1 (got %q)", n.BaseURL)
	}
	if n.APIKeyEnv != "" && !envNameRE.MatchString(n.APIKeyEnv) {
		bad(key+".api_key_env", "must be an environment variable's name (got %q)", n.APIKeyEnv)
	}
	if n.MaxTokens < 1 || n.MaxTokens > 1<<20 {
		bad(key+".max_tokens", "must be 1..1048576 (got %d)", n.MaxTokens)
	}
	if n.MaxRetries != nil && (*n.MaxRetries < 0 || *n.MaxRetries > 20) {
		bad(key+".max_retries", "must be 0..20 (got %d)", *n.MaxRetries)
	}
	if n.CommandTimeout < 0 {
		bad(key+".command_timeout", "must not be negative (got %s)", n.CommandTimeout)
	}
	b := n.Budget
	if b.Turns < 0 {
		bad(key+".budget.turns", "must not be negative (got %d)", b.Turns)
	}
	for name, v := range map[string]int64{"tokens": b.Tokens, "input_tokens": b.InputTokens, "output_tokens": b.OutputTokens} {
		if v < 0 {
			bad(key+".budget."+name, "must not be negative (got %d)", v)
		}
	}
	if b.Time < 0 {
		bad(key+".budget.time", "must not be negative (got %s)", b.Time)
	}
	p := n.Price
	for name, v := range map[string]float64{"input": p.Input, "output": p.Output, "cache_read": p.CacheRead, "cache_write": p.CacheWrite} {
		if v < 0 || v > 10000 {
			bad(key+".price."+name, "must be 0..10000 dollars per million tokens (got %g)", v)
		}
	}
	if rt.Timeout < 0 || rt.Grace < 0 {
		bad(key, "timeouts must not be negative")
	}
	for _, e := range rt.Env {
		if name, _, ok := strings.Cut(e, "="); !ok || name == "" || strings.ContainsAny(name, " \t\n") {
			bad(key+".env", "entry %q is not NAME=value", e)
		}
	}
	for _, e := range rt.EnvPassthrough {
		if e == "" || strings.ContainsAny(e, "= \t\n") {
			bad(key+".env_passthrough", "bad variable name %q", e)
		}
		if e == n.APIKeyEnv {
			bad(key+".env_passthrough", "passes %s, the API key, to the model's shell commands; the key is read by Drover and must not be", e)
		}
	}
}
