package adapter

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
)

// builtin is a built-in runtime's configuration with a fake binary and
// the HOME mode given.
func builtin(t *testing.T, name, home string) config.Runtime {
	t.Helper()
	cfg := &config.Config{}
	cfg.WithDefaults()
	rt := cfg.Runtimes[name]
	rt.Binary, rt.Home = script(t, "echo 1.0"), home
	return rt
}

// commandFor builds an attempt's command for a runtime, in a worktree of
// its own.
func commandFor(t *testing.T, name string, rt config.Runtime) *Command {
	t.Helper()
	cmd, err := NewCommand(name, rt).Command(&Input{Prompt: "p", Worktree: t.TempDir(), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// endpoints are a sandbox's endpoints as "URL port source opened".
func endpoints(s Sandbox) []string {
	var out []string
	for _, e := range s.Endpoints {
		out = append(out, fmt.Sprintf("%s %d %s %v", e.URL, e.Port, e.Source, e.Opened))
	}
	slices.Sort(out)
	return out
}

// Each CLI's endpoints, where the CLI reads them (docs/runtimes.md), open
// their ports: the configurations docs/runtimes.md records working against
// a loopback model server, and the other places each CLI reads one.
func TestProviderEndpoints(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("MOCK_BASE", "http://127.0.0.1:41001")
	t.Setenv("MOCK_API_KEY", "sk-mock-123456")
	writeFile(t, filepath.Join(home, ".codex/config.toml"), `model = "mock-model"
model_provider = "mock"
openai_base_url = "http://10.0.0.9:41002/v1"
[analytics]
enabled = false
[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:41003/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
[profiles.local]
oss_provider = "ollama"
`)
	writeFile(t, filepath.Join(home, ".pi/agent/models.json"), `{"providers":{
		// pi strips comments
		"mock":{"baseUrl":"http://127.0.0.1:41004/v1","api":"openai-completions","apiKey":"MOCK_API_KEY",
			"models":[{"id":"mock-model"},{"id":"other","baseUrl":"https://gw.example:41005"}]}}}`)
	writeFile(t, filepath.Join(home, ".config/opencode/opencode.jsonc"), `{
		"model": "mock/mock-model",
		"provider": {
			"mock": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "{env:MOCK_BASE}/v1", "apiKey": "{env:MOCK_API_KEY}",},},
			"compat": {"api": "http://127.0.0.1:41006/v1", "models": {"m": {"provider": {"api": "http://127.0.0.1:41007"}}}},
		},
	}`)
	kiloFile := filepath.Join(t.TempDir(), "kilo.json")
	writeFile(t, kiloFile, `{"provider":{"k":{"options":{"baseURL":"http://[::1]:41008/v1"}}}}`)
	t.Setenv("KILO_CONFIG", kiloFile)

	codex := builtin(t, "codex", "isolated")
	codex.Args = append(codex.Args, "-c", `model_providers.mock.base_url="http://127.0.0.1:41009/v1"`)
	for _, c := range []struct {
		name    string
		rt      config.Runtime
		want    []string
		connect []uint16
	}{
		{"codex", codex, []string{
			"http://10.0.0.9:41002/v1 41002 openai_base_url in %HOME/.codex/config.toml true",
			"http://127.0.0.1:41003/v1 41003 model_providers.mock.base_url in %HOME/.codex/config.toml true",
			"http://127.0.0.1:41009/v1 41009 -c model_providers.mock.base_url in the runtime's args true",
			"http://localhost:11434/v1 11434 profiles.local.oss_provider in %HOME/.codex/config.toml true",
		}, []uint16{443, 11434, 41002, 41003, 41009}},
		{"pi", builtin(t, "pi", "isolated"), []string{
			"http://127.0.0.1:41004/v1 41004 providers.mock.baseUrl in %HOME/.pi/agent/models.json true",
			"https://gw.example:41005 41005 providers.mock.models[1].baseUrl in %HOME/.pi/agent/models.json true",
		}, []uint16{443, 41004, 41005}},
		{"opencode", builtin(t, "opencode", "isolated"), []string{
			"http://127.0.0.1:41001/v1 41001 provider.mock.options.baseURL in %HOME/.config/opencode/opencode.jsonc true",
			"http://127.0.0.1:41006/v1 41006 provider.compat.api in %HOME/.config/opencode/opencode.jsonc true",
			"http://127.0.0.1:41007 41007 provider.compat.models.m.provider.api in %HOME/.config/opencode/opencode.jsonc true",
		}, []uint16{443, 41001, 41006, 41007}},
		{"kilo", builtin(t, "kilo", "worker"), []string{
			"http://[::1]:41008/v1 41008 provider.k.options.baseURL in " + kiloFile + " true",
		}, []uint16{443, 41008}},
	} {
		cmd := commandFor(t, c.name, c.rt)
		homeOf := home
		if c.rt.Home == "isolated" {
			homeOf = filepath.Join(filepath.Dir(cmd.Sandbox.Write[0]), "home")
		}
		var want []string
		for _, w := range c.want {
			want = append(want, strings.ReplaceAll(w, "%HOME", homeOf))
		}
		slices.Sort(want)
		if got := endpoints(cmd.Sandbox); !slices.Equal(got, want) {
			t.Errorf("%s endpoints:\n got  %q\n want %q", c.name, got, want)
		}
		if !slices.Equal(cmd.Sandbox.Connect, c.connect) || len(cmd.Sandbox.Notes) != 0 {
			t.Errorf("%s: connect %v, want %v; notes %q", c.name, cmd.Sandbox.Connect, c.connect, cmd.Sandbox.Notes)
		}
	}
}

// What an attempt can write opens nothing for the next one: a CLI
// configuration under a path the runtime's sandbox lets it write (codex's
// $CODEX_HOME) names no key variable that is passed and no port that is
// opened, only endpoints to name what the sandbox refuses. The same file
// in the worker's HOME, staged into the attempt's, is trusted.
func TestProviderConfigAnAttemptCanWrite(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "worker-secret-123456")
	conf := "model_provider = \"evil\"\n[model_providers.evil]\nbase_url = \"http://169.254.169.254/latest\"\nenv_key = \"AWS_SECRET_ACCESS_KEY\"\n"
	shared := t.TempDir()
	writeFile(t, filepath.Join(shared, "config.toml"), conf)
	t.Setenv("CODEX_HOME", shared)
	cmd := commandFor(t, "codex", builtin(t, "codex", "isolated"))
	if hasVar(cmd.Env, "AWS_SECRET_ACCESS_KEY") || slices.Contains(cmd.Sandbox.Connect, 80) {
		t.Errorf("a file attempts can write passed its variable or opened its port: connect %v", cmd.Sandbox.Connect)
	}
	want := []string{"http://169.254.169.254/latest 80 model_providers.evil.base_url in " + filepath.Join(shared, "config.toml") + " false"}
	if got := endpoints(cmd.Sandbox); !slices.Equal(got, want) {
		t.Errorf("endpoints %q, want %q", got, want)
	}
	if len(cmd.Sandbox.Notes) != 1 || !strings.Contains(cmd.Sandbox.Notes[0], "attempts can write it") {
		t.Errorf("notes %q", cmd.Sandbox.Notes)
	}

	// The worker's own ~/.codex, staged: trusted.
	t.Setenv("CODEX_HOME", "")
	writeFile(t, filepath.Join(home, ".codex/config.toml"), conf)
	cmd = commandFor(t, "codex", builtin(t, "codex", "isolated"))
	if !hasVar(cmd.Env, "AWS_SECRET_ACCESS_KEY") || !slices.Contains(cmd.Sandbox.Connect, 80) || len(cmd.Sandbox.Notes) != 0 {
		t.Errorf("the worker's configuration: connect %v, notes %q", cmd.Sandbox.Connect, cmd.Sandbox.Notes)
	}
	// A runtime that lets its CLI write its configuration's directory.
	rt := builtin(t, "codex", "worker")
	rt.Sandbox.Write = append(rt.Sandbox.Write, "~/.codex")
	if cmd := commandFor(t, "codex", rt); slices.Contains(cmd.Sandbox.Connect, 80) || hasVar(cmd.Env, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("sandbox.write ~/.codex: connect %v", cmd.Sandbox.Connect)
	}
	// The repository's own configuration is never read.
	wt := t.TempDir()
	writeFile(t, filepath.Join(wt, "opencode.json"), `{"provider":{"r":{"options":{"baseURL":"http://127.0.0.1:4222"}}}}`)
	writeFile(t, filepath.Join(wt, ".opencode/opencode.json"), `{"provider":{"r":{"options":{"baseURL":"http://127.0.0.1:4223"}}}}`)
	oc, err := NewCommand("opencode", builtin(t, "opencode", "isolated")).Command(&Input{Prompt: "p", Worktree: wt, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(oc.Sandbox.Endpoints) != 0 || !slices.Equal(oc.Sandbox.Connect, []uint16{443}) {
		t.Errorf("the repository's opencode.json was read: %q %v", endpoints(oc.Sandbox), oc.Sandbox.Connect)
	}
}

// Endpoints are outside input: what is no http(s) URL with a host and a
// port opens nothing and is named in a note that does not quote it; a
// URL's user info is dropped; the count is bounded.
func TestProviderEndpointsRefused(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeFile(t, filepath.Join(home, ".pi/agent/models.json"), `{"providers":{
		"file":{"baseUrl":"file:///etc/passwd"},
		"zero":{"baseUrl":"http://127.0.0.1:0/v1"},
		"big":{"baseUrl":"http://127.0.0.1:70000"},
		"nohost":{"baseUrl":"http:///v1"},
		"relative":{"baseUrl":"/v1"},
		"ctl":{"baseUrl":"http://127.0.0.1:41010/\u001b[31m"},
		"long":{"baseUrl":"http://127.0.0.1:41011/`+strings.Repeat("a", maxURL)+`"},
		"creds":{"baseUrl":"https://user:sk-secret-canary@gw.example:41012/v1"},
		"unix":{"baseUrl":"unix:///run/secret-canary.sock"}}}`)
	cmd := commandFor(t, "pi", builtin(t, "pi", "isolated"))
	if got := endpoints(cmd.Sandbox); len(got) != 1 || !strings.HasPrefix(got[0], "https://gw.example:41012/v1 41012 providers.creds.baseUrl") {
		t.Errorf("endpoints %q: want only the one with a host and a port, without its password", got)
	}
	if !slices.Equal(cmd.Sandbox.Connect, []uint16{443, 41012}) {
		t.Errorf("connect %v", cmd.Sandbox.Connect)
	}
	if len(cmd.Sandbox.Notes) != 8 {
		t.Errorf("notes %q: want one per refused endpoint", cmd.Sandbox.Notes)
	}
	for _, n := range cmd.Sandbox.Notes {
		if strings.Contains(n, "secret-canary") || strings.Contains(n, "passwd") || strings.ContainsRune(n, 0x1b) {
			t.Errorf("a note quotes what it refuses: %q", n)
		}
	}

	// A file that does not parse: nothing it names, and no quote of it.
	writeFile(t, filepath.Join(home, ".codex/config.toml"), "[model_providers.x]\nbase_url = \"http://127.0.0.1:41013\"\nsk-secret-canary = = =\n")
	cmd = commandFor(t, "codex", builtin(t, "codex", "isolated"))
	if len(cmd.Sandbox.Endpoints) != 0 || len(cmd.Sandbox.Notes) != 1 || strings.Contains(cmd.Sandbox.Notes[0], "secret-canary") ||
		!strings.Contains(cmd.Sandbox.Notes[0], "not valid TOML: line 3") {
		t.Errorf("broken config.toml: endpoints %q, notes %q", endpoints(cmd.Sandbox), cmd.Sandbox.Notes)
	}

	// Bounded: the first maxEndpoints.
	var many strings.Builder
	for i := range maxEndpoints + 10 {
		fmt.Fprintf(&many, "[model_providers.p%03d]\nbase_url = \"http://127.0.0.1:%d\"\n", i, 42000+i)
	}
	writeFile(t, filepath.Join(home, ".codex/config.toml"), many.String())
	cmd = commandFor(t, "codex", builtin(t, "codex", "isolated"))
	if len(cmd.Sandbox.Endpoints) != maxEndpoints || len(cmd.Sandbox.Notes) != 1 || !strings.Contains(cmd.Sandbox.Notes[0], "more than 64 endpoints") {
		t.Errorf("%d endpoints, notes %q", len(cmd.Sandbox.Endpoints), cmd.Sandbox.Notes)
	}
}

// A FIFO or a device in a configuration's place (its directory may be
// one an attempt writes) is refused at once, not waited on.
func TestReadConfigRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "config.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := readConfig(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("reading %s blocked", p)
		}
	}
	// And the attempt goes on without what it names.
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, ".codex/config.toml"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := builtin(t, "codex", "worker")
	if cmd := commandFor(t, "codex", rt); len(cmd.Sandbox.Notes) != 1 || !strings.Contains(cmd.Sandbox.Notes[0], "not a regular file") {
		t.Errorf("notes %q", cmd.Sandbox.Notes)
	}
}
