package config

import "strings"

// builtinRuntimes are the runtimes Drover knows without configuration: the
// seven coding-agent CLIs with the headless argv, environment and output
// format recorded from real runs (docs/runtimes.md), and the bundled demo
// agent. They are
// plain Runtime values: configuring a runtime of the same name overrides any
// field.
func builtinRuntimes() map[string]Runtime {
	return map[string]Runtime{
		// The bundled demo agent: no API key, no network.
		"demo": {Adapter: "command", Binary: "demo-agent", Input: "stdin", Output: "claude-stream-json"},
		// The demo agent as a validator: it reviews the diff it is shown.
		"demo-review": {Adapter: "command", Binary: "demo-agent", Args: []string{"--review"}, Input: "stdin"},

		// claude -p PROMPT --output-format stream-json --verbose --dangerously-skip-permissions.
		// As root the permission bypass needs IS_SANDBOX=1 (pass it through where
		// workers run as root in a sandbox). CLAUDE_CODE_MAX_RETRIES caps its own
		// retries, which otherwise last about 3 minutes on 401/429, so that
		// Drover's fallback acts quickly.
		"claude-code": {
			Binary: "claude", Input: "arg", PromptFlag: "-p",
			Args:      []string{"--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
			ModelFlag: "--model", Output: "claude-stream-json", Models: []string{"sonnet", "opus", "haiku"},
			HomeFiles: []string{".claude/.credentials.json", ".claude/settings.json", ".claude.json"},
			EnvPassthrough: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
				"CLAUDE_CODE_OAUTH_TOKEN", "IS_SANDBOX"},
			Env: []string{"CLAUDE_CODE_MAX_RETRIES=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		},
		// codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT.
		// A custom provider's key is in the variable config.toml's
		// model_providers.<id>.env_key names (provider_config). Its own
		// retries end within 8 s (5 reconnects): no cap needed.
		"codex": {
			Binary: "codex", Input: "arg",
			Args:      []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"},
			ModelFlag: "-m", Output: "codex-json", HomeFiles: []string{".codex/auth.json", ".codex/config.toml"},
			EnvPassthrough: []string{"OPENAI_API_KEY", "CODEX_HOME"}, ProviderConfig: "codex",
		},
		// opencode run --format json --auto PROMPT. Its global config
		// (~/.config/opencode: providers, {env:NAME} keys) and the keys of
		// `opencode auth login` (~/.local/share/opencode/auth.json).
		"opencode": {
			Binary: "opencode", Input: "arg",
			Args:      []string{"run", "--format", "json", "--auto"},
			ModelFlag: "-m", Output: "opencode-json",
			HomeFiles: []string{".config/opencode", ".local/share/opencode/auth.json"},
			EnvPassthrough: []string{"OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
				"GEMINI_API_KEY", "OPENROUTER_API_KEY"},
			Env:            []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1"},
			ProviderConfig: "opencode",
		},
		// kilo run --format json --auto PROMPT (an opencode fork: same flags and output).
		"kilo": {
			Binary: "kilo", Input: "arg",
			Args:      []string{"run", "--format", "json", "--auto"},
			ModelFlag: "-m", Output: "opencode-json",
			HomeFiles: []string{".config/kilo", ".local/share/kilo/auth.json"},
			EnvPassthrough: []string{"KILO_CONFIG", "KILO_CONFIG_CONTENT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
				"OPENROUTER_API_KEY"},
			Env:            []string{"KILO_DISABLE_AUTOUPDATE=1", "KILO_DISABLE_MODELS_FETCH=1", "KILO_TELEMETRY_LEVEL=off"},
			ProviderConfig: "kilo",
		},
		// gemini --output-format stream-json --yolo --skip-trust -p PROMPT.
		// Without --skip-trust it exits 55 in an untrusted folder and drops --yolo.
		// Its retries of a 429 (5 minutes) have no cap a variable can set:
		// settings.json general.maxAttempts leaves the routing call's 5
		// tries, 65 s; own_retry_timeout stops it.
		"gemini": {
			Binary: "gemini", Input: "arg", PromptFlag: "-p",
			Args:      []string{"--output-format", "stream-json", "--yolo", "--skip-trust"},
			ModelFlag: "-m", Output: "gemini-stream-json", HomeFiles: []string{".gemini/settings.json", ".gemini/oauth_creds.json"},
			EnvPassthrough: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
				"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_CLOUD_PROJECT"},
		},
		// pi --mode json --no-session -p PROMPT. models.json names the
		// variable holding a provider's key (apiKey): provider_config. Its
		// retries (settings.json retry.maxRetries, no variable) take 23 s.
		"pi": {
			Binary: "pi", Input: "arg", PromptFlag: "-p",
			Args:      []string{"--mode", "json", "--no-session"},
			ModelFlag: "--model", Output: "pi-json", HomeFiles: []string{".pi/agent"},
			EnvPassthrough: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "PI_CODING_AGENT_DIR"},
			Env:            []string{"PI_TELEMETRY=0"}, ProviderConfig: "pi",
		},
		// copilot --output-format json --allow-all-tools --disable-client-telemetry --no-auto-update -p PROMPT.
		"copilot": {
			Binary: "copilot", Input: "arg", PromptFlag: "-p",
			Args:      []string{"--output-format", "json", "--allow-all-tools", "--disable-client-telemetry", "--no-auto-update"},
			ModelFlag: "--model", Output: "copilot-json", HomeFiles: []string{".copilot"},
			EnvPassthrough: []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_BASE_URL",
				"COPILOT_PROVIDER_TYPE", "COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_WIRE_API", "COPILOT_MODEL", "COPILOT_OFFLINE"},
			Env: []string{"COPILOT_AUTO_UPDATE=false"},
		},
	}
}

// overlay returns base with every field that over sets replacing it, and
// over's sandbox entries added to base's.
func overlay(base, over Runtime) Runtime {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&base.Adapter, over.Adapter)
	set(&base.Binary, over.Binary)
	set(&base.Input, over.Input)
	set(&base.PromptFlag, over.PromptFlag)
	set(&base.Model, over.Model)
	set(&base.ModelFlag, over.ModelFlag)
	if over.Output != "" {
		base.Output = over.Output
	}
	set(&base.Home, over.Home)
	set(&base.ProviderConfig, over.ProviderConfig)
	set(&base.MinVersion, over.MinVersion)
	base.Sandbox = base.Sandbox.merged(over.Sandbox)
	if over.HomeFiles != nil {
		base.HomeFiles = over.HomeFiles
	}
	if over.Args != nil {
		base.Args = over.Args
	}
	if over.EnvPassthrough != nil {
		base.EnvPassthrough = over.EnvPassthrough
	}
	if over.EnvPassthroughAdd != nil {
		base.EnvPassthroughAdd = over.EnvPassthroughAdd
	}
	if over.Limits != (Limits{}) {
		base.Limits = over.Limits
	}
	if over.NativeRuntime != (NativeRuntime{}) {
		base.NativeRuntime = over.NativeRuntime
	}
	if over.Models != nil {
		base.Models = over.Models
	}
	if over.VersionArgs != nil {
		base.VersionArgs = over.VersionArgs
	}
	if over.Env != nil {
		base.Env = mergeEnv(base.Env, over.Env)
	}
	if over.Timeout != 0 {
		base.Timeout = over.Timeout
	}
	if over.Grace != 0 {
		base.Grace = over.Grace
	}
	if over.NoOutputTimeout != 0 {
		base.NoOutputTimeout = over.NoOutputTimeout
	}
	if over.OwnRetryTimeout != 0 {
		base.OwnRetryTimeout = over.OwnRetryTimeout
	}
	if over.MaxOutputSize != 0 {
		base.MaxOutputSize = over.MaxOutputSize
	}
	return base
}

// mergeEnv returns base's NAME=value entries with over's replacing or adding.
func mergeEnv(base, over []string) []string {
	out := append([]string(nil), base...)
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, b := range out {
			if n, _, _ := strings.Cut(b, "="); n == name {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
