package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNativeRuntime(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("DROVER_RUNTIMES_LOCAL_MODEL", "qwen3-coder")
	t.Setenv("DROVER_RUNTIMES_LOCAL_MAX_TOKENS", "2048")
	t.Setenv("DROVER_RUNTIMES_LOCAL_API_KEY_ENV", "LOCAL_KEY")
	p := writeFile(t, `
runtimes:
  claude-native:
    adapter: native
    provider: anthropic
    model: claude-sonnet-4-5
    budget: {turns: 60, tokens: 2000000}
    timeout: 20m
    env: ["GOFLAGS=-mod=mod"]
  gpt:
    adapter: native
    provider: openai-responses
    model: gpt-5
    api_key_env: MY_OPENAI_KEY
    max_retries: 0
    budget: {input_tokens: 100, output_tokens: 50, time: 90s}
    price: {input: 1.25, output: 10}
  local:
    adapter: native
    provider: openai-chat
    base_url: http://localhost:11434/v1
    command_timeout: 30s
`)
	c, err := Load(LoadOptions{File: p})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Runtimes["claude-native"]
	if a.Provider != "anthropic" || a.BaseURL != "https://api.anthropic.com" || a.APIKeyEnv != "ANTHROPIC_API_KEY" ||
		a.Budget.Turns != 60 || a.Budget.Tokens != 2000000 || a.Timeout != 20*time.Minute || a.MaxTokens != 16384 ||
		*a.MaxRetries != 3 || a.CommandTimeout != 2*time.Minute || a.Env[0] != "GOFLAGS=-mod=mod" {
		t.Errorf("anthropic runtime: %+v", a)
	}
	g := c.Runtimes["gpt"]
	if g.BaseURL != "https://api.openai.com/v1" || g.APIKeyEnv != "MY_OPENAI_KEY" || *g.MaxRetries != 0 ||
		g.Budget.InputTokens != 100 || g.Budget.OutputTokens != 50 || g.Budget.Time != 90*time.Second || g.Price.Output != 10 {
		t.Errorf("responses runtime: %+v", g)
	}
	l := c.Runtimes["local"]
	if l.APIKeyEnv != "LOCAL_KEY" || l.Model != "qwen3-coder" || l.MaxTokens != 2048 || l.CommandTimeout != 30*time.Second {
		t.Errorf("chat runtime (model, max_tokens and api_key_env from the environment): %+v", l)
	}
}

func TestNativeInvalid(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cases := []struct{ body, want string }{
		{"provider: gemini\n    model: m", `runtimes.x.provider: must be anthropic, openai-responses, openai-chat (got "gemini")`},
		{"provider: anthropic", "runtimes.x.model: is required for a native runtime"},
		{"provider: openai-chat\n    model: m", "runtimes.x.base_url: is required for provider openai-chat"},
		{"provider: openai-chat\n    model: m\n    base_url: localhost:8000", `runtimes.x.base_url: must be an http or https URL`},
		{"provider: openai-chat\n    model: m\n    base_url: http://u:p@h/v1", "runtimes.x.base_url: must not carry credentials"},
		{"provider: anthropic\n    model: m\n    base_url: https://api.anthropic.com/v1", "without /v1"},
		{"provider: anthropic\n    model: m\n    api_key_env: MY-KEY", "runtimes.x.api_key_env: must be an environment variable's name"},
		{"provider: anthropic\n    model: m\n    max_tokens: -1", "runtimes.x.max_tokens: must be 1..1048576"},
		{"provider: anthropic\n    model: m\n    max_retries: 50", "runtimes.x.max_retries: must be 0..20"},
		{"provider: anthropic\n    model: m\n    budget: {turns: -1}", "runtimes.x.budget.turns: must not be negative"},
		{"provider: anthropic\n    model: m\n    budget: {output_tokens: -5}", "runtimes.x.budget.output_tokens: must not be negative"},
		{"provider: anthropic\n    model: m\n    budget: {time: -1s}", "runtimes.x.budget.time: must not be negative"},
		{"provider: anthropic\n    model: m\n    budget: {turn: 5}", "has invalid keys: turn"},
		{"provider: anthropic\n    model: m\n    price: {output: -1}", "runtimes.x.price.output: must be 0..10000"},
		{"provider: anthropic\n    model: m\n    env_passthrough: [ANTHROPIC_API_KEY]", "runtimes.x.env_passthrough: passes ANTHROPIC_API_KEY, the API key"},
		{"provider: anthropic\n    model: m\n    command_timeout: -1s", "runtimes.x.command_timeout: must not be negative"},
	}
	for _, c := range cases {
		_, err := Load(LoadOptions{File: writeFile(t, "runtimes:\n  x:\n    adapter: native\n    "+c.body+"\n")})
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant an error with %q", c.body, err, c.want)
		}
	}
	// A command runtime is still checked as before, and names both adapters.
	_, err := Load(LoadOptions{File: writeFile(t, "runtimes:\n  x:\n    adapter: nope\n    binary: x\n")})
	if err == nil || !strings.Contains(err.Error(), `unknown adapter "nope" (known: command, native)`) {
		t.Errorf("unknown adapter: %v", err)
	}
}
