package adapter

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/drover-dev/drover/internal/config"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func keyVars(t *testing.T, kind, home string, env ...string) []string {
	t.Helper()
	names, err := KeyVariables(kind, home, env)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The configurations as docs/runtimes.md records them working against a
// provider of one's own, and what each names.
func TestKeyVariables(t *testing.T) {
	home := t.TempDir()
	// codex: the recorded config.toml, a second provider with headers.
	writeFile(t, filepath.Join(home, ".codex/config.toml"), `model = "mock-model"
model_provider = "mock"
[analytics]
enabled = false
[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:1/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
[model_providers.gateway]
base_url = "https://gw.example/v1"
env_key = "GATEWAY_KEY"
env_http_headers = { "X-Team" = "GATEWAY_TEAM" }
`)
	if got := keyVars(t, "codex", home); !slices.Equal(got, []string{"GATEWAY_KEY", "GATEWAY_TEAM", "MOCK_API_KEY"}) {
		t.Errorf("codex: %q", got)
	}
	// CODEX_HOME moves it, as it moves codex's.
	moved := t.TempDir()
	writeFile(t, filepath.Join(moved, "config.toml"), "[model_providers.x]\nenv_key = \"MOVED_KEY\"\n")
	if got := keyVars(t, "codex", home, "CODEX_HOME="+moved); !slices.Equal(got, []string{"MOVED_KEY"}) {
		t.Errorf("codex with CODEX_HOME: %q", got)
	}

	// pi: models.json names its key by variable; a literal key, a command
	// and a literal that is no name are not variables.
	writeFile(t, filepath.Join(home, ".pi/agent/models.json"), `{"providers":{
		"mock":{"baseUrl":"http://127.0.0.1:1/v1","api":"openai-completions","apiKey":"MOCK_API_KEY","models":[{"id":"mock-model","headers":{"X-A":"MODEL_HDR"}}]},
		"lit":{"apiKey":"sk-literal-key-1234","headers":{"X-B":"!cat /etc/key"}},
		"over":{"modelOverrides":{"m":{"headers":{"X-C":"OVERRIDE_HDR"}}}}}}`)
	writeFile(t, filepath.Join(home, ".pi/agent/auth.json"), `{"anthropic":{"type":"api_key","key":"PI_ANTHROPIC"},"oa":{"type":"oauth","key":"NOT_A_KEY_VAR"}}`)
	if got := keyVars(t, "pi", home); !slices.Equal(got, []string{"MOCK_API_KEY", "MODEL_HDR", "OVERRIDE_HDR", "PI_ANTHROPIC"}) {
		t.Errorf("pi: %q", got)
	}
	if got := keyVars(t, "pi", home, "PI_CODING_AGENT_DIR=~/elsewhere"); len(got) != 0 {
		t.Errorf("pi with an empty PI_CODING_AGENT_DIR: %q", got)
	}

	// opencode: {env:NAME} anywhere in JSONC, comments and trailing commas
	// included; a reference in a comment is not one the CLI uses.
	writeFile(t, filepath.Join(home, ".config/opencode/opencode.jsonc"), `{
		// {env:IN_A_COMMENT} is not read
		"model": "mock/mock-model",
		"provider": {
			"mock": {
				"npm": "@ai-sdk/openai-compatible",
				"options": {"baseURL": "{env:MOCK_BASE}/v1", "apiKey": "{env:MOCK_API_KEY}", }, /* trailing */
				"models": {"mock-model": {"tool_call": true}},
			},
		},
	}`)
	file := filepath.Join(t.TempDir(), "custom.json")
	writeFile(t, file, `{"provider":{"x":{"options":{"headers":{"{env:KEY_IN_A_KEY}":"{env:HDR}"}}}}}`)
	got := keyVars(t, "opencode", home, "OPENCODE_CONFIG="+file, `OPENCODE_CONFIG_CONTENT={"provider":{"y":{"options":{"apiKey":"{env:INLINE_KEY}"}}}}`)
	if !slices.Equal(got, []string{"HDR", "INLINE_KEY", "KEY_IN_A_KEY", "MOCK_API_KEY", "MOCK_BASE"}) {
		t.Errorf("opencode: %q", got)
	}
	// kilo reads its own directory, and kilo.json too.
	writeFile(t, filepath.Join(home, ".config/kilo/kilo.json"), `{"provider":{"k":{"options":{"apiKey":"{env:KILO_KEY}"}}}}`)
	if got := keyVars(t, "kilo", home); !slices.Equal(got, []string{"KILO_KEY"}) {
		t.Errorf("kilo: %q", got)
	}
}

// What a configuration names is not trusted for its shape: a name that is
// not a variable's, and Drover's own variables, are never passed.
func TestKeyVariablesRefused(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".codex/config.toml"), `[model_providers.a]
env_key = "DROVER_NATS_PASSWORD"
[model_providers.b]
env_key = "NOT A NAME"
[model_providers.c]
env_key = "OK_KEY"
`)
	if got := keyVars(t, "codex", home); !slices.Equal(got, []string{"OK_KEY"}) {
		t.Errorf("codex: %q", got)
	}
	// A file the CLI would refuse is an error; a missing one is not.
	writeFile(t, filepath.Join(home, ".pi/agent/models.json"), `{"providers":`)
	if _, err := KeyVariables("pi", home, nil); err == nil || !strings.Contains(err.Error(), "models.json") {
		t.Errorf("broken models.json: %v", err)
	}
	if got := keyVars(t, "opencode", t.TempDir()); len(got) != 0 {
		t.Errorf("no configuration: %q", got)
	}
	writeFile(t, filepath.Join(home, ".config/opencode/opencode.json"), strings.Repeat(" ", maxConfigFile+1))
	if _, err := KeyVariables("opencode", home, nil); err == nil {
		t.Error("an oversized configuration was read")
	}
}

// The command's environment carries the variables the staged provider
// configuration names, set on the worker, whether the HOME is the
// worker's or an isolated one staged from it; nothing else of the worker's.
func TestCommandPassesKeyVariables(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("MOCK_API_KEY", "sk-mock-123456")
	t.Setenv("UNNAMED_SECRET", "nope-123456")
	writeFile(t, filepath.Join(home, ".codex/config.toml"), "[model_providers.mock]\nenv_key = \"MOCK_API_KEY\"\n")
	bin := filepath.Join(t.TempDir(), "codex")
	writeFile(t, bin, "#!/bin/sh\necho codex-cli 0.169.0\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"worker", "isolated"} {
		cfg := &config.Config{}
		cfg.WithDefaults()
		rt := cfg.Runtimes["codex"]
		rt.Binary, rt.Home = bin, mode
		cmd, err := NewCommand("codex", rt).Command(&Input{Prompt: "p", TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(cmd.Env, "MOCK_API_KEY=sk-mock-123456") || slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "UNNAMED_SECRET=") }) {
			t.Errorf("home %s: env %q", mode, cmd.Env)
		}
		// provider_config none turns it off.
		rt.ProviderConfig = "none"
		cmd, err = NewCommand("codex", rt).Command(&Input{Prompt: "p", TempDir: t.TempDir()})
		if err != nil || slices.Contains(cmd.Env, "MOCK_API_KEY=sk-mock-123456") {
			t.Errorf("provider_config none: env %q, %v", cmd.Env, err)
		}
	}
	if got := HostKeyVariables(config.Runtime{ProviderConfig: "codex"}); !slices.Equal(got, []string{"MOCK_API_KEY"}) {
		t.Errorf("HostKeyVariables = %q", got)
	}
}

func TestStripJSONC(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1, // c` + "\n" + `}`:              `{"a": 1}`,
		`[1, 2, /* x */ ]`:                        `[1, 2]`,
		`{"s": "// not a comment, /* nor */",}`:   `{"s": "// not a comment, /* nor */"}`,
		`{"s": "quote \" // still string"}`:       `{"s": "quote \" // still string"}`,
		`{"a":[1,],"b":{"c":2,},}`:                `{"a":[1],"b":{"c":2}}`,
		`{"url": "http://x/{env:K}"} // trailing`: `{"url": "http://x/{env:K}"}`,
	} {
		out, err := stripJSONC([]byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		var got, exp any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Errorf("%q -> %q: %v", in, out, err)
			continue
		}
		_ = json.Unmarshal([]byte(want), &exp)
		g, _ := json.Marshal(got)
		e, _ := json.Marshal(exp)
		if string(g) != string(e) {
			t.Errorf("%q -> %s, want %s", in, g, e)
		}
	}
	// Not JSON stays not JSON; an open comment is an error.
	for _, in := range []string{`{"a" 1}`, `[,]`, `{,}`, `/* open`, `{"a":1 /* open`} {
		out, err := stripJSONC([]byte(in))
		if err == nil && json.Valid(out) {
			t.Errorf("%q became valid JSON %q", in, out)
		}
	}
}

// FuzzStripJSONC: whatever the bytes, stripping never panics, keeps
// every string as it was, and valid JSON stays the same JSON.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a":1,}`, `// x` + "\n" + `[1]`, `{"s":"/*"}`, `"\"`, `/*`, `{"k":"{env:X}"} /* c */`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := stripJSONC(in)
		if err != nil {
			return
		}
		if json.Valid(in) {
			var a, b any
			if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil {
				t.Fatalf("valid JSON %q stripped to invalid %q", in, out)
			}
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			if string(x) != string(y) {
				t.Fatalf("%q changed meaning: %s -> %s", in, x, y)
			}
		}
	})
}

// FuzzProviderConfig: a configuration of any bytes, in each CLI's format,
// never panics, yields only variable names, and every endpoint it names
// either resolves to an http(s) or ws(s) URL with a host and a port, with
// no user info, no control character and bounded in size, or is refused
// in words that do not quote it.
func FuzzProviderConfig(f *testing.F) {
	f.Add([]byte(`{"provider":{"a":{"options":{"apiKey":"{env:K}","baseURL":"{env:B}/v1"},"api":"http://h:1","models":{"m":{"provider":{"api":"${X}"}}}}}}`))
	f.Add([]byte("[model_providers.a]\nenv_key=\"K\"\nbase_url=\"http://127.0.0.1:41234/v1\"\nenv_http_headers={h=\"H\"}\n[profiles.p]\noss_provider=\"ollama\"\n"))
	f.Add([]byte(`{"providers":{"a":{"apiKey":"K","baseUrl":"https://u:p@h:99/v1","headers":{"x":"!cmd"},"models":[{"id":"m","baseUrl":"ws://[::1]:7/"}]}}}`))
	f.Add([]byte(`{"p":{"type":"api_key","key":"K"}}`))
	f.Add([]byte("openai_base_url = \"http://h:0\"\nchatgpt_base_url = \"file:///etc/passwd\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		env := map[string]string{"B": "http://127.0.0.1:8080", "X": "\x00"}
		for _, parse := range []func([]byte) (named, error){codexNamed, piModelNamed, piAuthNamed, openCodeNamed} {
			n, err := parse(b)
			if err != nil {
				if bytes.Contains([]byte(err.Error()), []byte("secret-canary")) {
					t.Fatalf("the error quotes the file: %v", err)
				}
				continue
			}
			for _, k := range n.keys {
				if k == "" {
					t.Fatalf("an empty name from %q", b)
				}
			}
			for _, u := range n.urls {
				text, port, err := resolveURL(u, env)
				if err != nil {
					if strings.Contains(err.Error(), "secret-canary") {
						t.Fatalf("the refusal quotes the URL: %v", err)
					}
					continue
				}
				pu, perr := url.Parse(text)
				if perr != nil || pu.Hostname() == "" || port == 0 || pu.User != nil || len(text) > maxURL+16 ||
					strings.ContainsFunc(text, unicode.IsControl) {
					t.Fatalf("%q resolved to %q port %d", u.text, text, port)
				}
			}
		}
		codexArgs([]string{"-c", string(b), "--config=" + string(b)})
	})
}
