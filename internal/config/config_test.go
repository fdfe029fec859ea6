package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("data-dir", "", "")
	fs.Int("slots", 0, "")
	fs.String("pool", "", "")
	fs.StringSlice("runtimes", nil, "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestDefaults(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker.Slots != 2 || c.Worker.Pool != "default" || c.Queue.AckWait != 30*time.Second || c.Queue.Heartbeat != 10*time.Second {
		t.Errorf("defaults: %+v %+v", c.Worker, c.Queue)
	}
	if !strings.HasSuffix(c.DataDir, ".drover") || c.Worker.WorkDir != filepath.Join(c.DataDir, "worker") {
		t.Errorf("dirs: %s %s", c.DataDir, c.Worker.WorkDir)
	}
	if rt, ok := c.Runtimes["demo"]; !ok || rt.Binary != "demo-agent" || rt.Input != "stdin" || rt.Grace != 5*time.Second {
		t.Errorf("builtin demo runtime: %+v", rt)
	}
	want := []string{"claude-code", "codex", "copilot", "demo", "demo-review", "gemini", "kilo", "opencode", "pi"}
	if strings.Join(c.Worker.Runtimes, ",") != strings.Join(want, ",") {
		t.Errorf("worker runtimes: %v, want every built-in %v", c.Worker.Runtimes, want)
	}
}

// TestPrecedence: flag over environment over file over default.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "worker:\n  slots: 3\n  pool: from-file\nlog:\n  level: debug\n")
	t.Setenv("DROVER_WORKER_SLOTS", "5")
	t.Setenv("DROVER_WORKER_POOL", "from-env")
	c, err := Load(LoadOptions{File: file, Flags: flags(t, "--slots", "7"), Bind: FlagBindings})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker.Slots != 7 {
		t.Errorf("slots = %d, want the flag's 7", c.Worker.Slots)
	}
	if c.Worker.Pool != "from-env" {
		t.Errorf("pool = %q, want the environment's", c.Worker.Pool)
	}
	if c.Log.Level != "debug" {
		t.Errorf("log.level = %q, want the file's", c.Log.Level)
	}
	// An unset flag does not hide the environment.
	c, err = Load(LoadOptions{File: file, Flags: flags(t), Bind: FlagBindings})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker.Slots != 5 {
		t.Errorf("slots = %d, want the environment's 5", c.Worker.Slots)
	}
}

func TestConfigFileFromEnv(t *testing.T) {
	t.Setenv("DROVER_CONFIG", writeFile(t, "worker:\n  slots: 9\n"))
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker.Slots != 9 {
		t.Errorf("slots = %d", c.Worker.Slots)
	}
}

func TestRuntimes(t *testing.T) {
	file := writeFile(t, `
defaults:
  runtime: my-agent
runtimes:
  my-agent:
    binary: /opt/my-agent
    args: ["--headless"]
    input: arg
    prompt_flag: -p
    env_passthrough: [MY_KEY]
    timeout: 20m
    version_args: []
`)
	t.Setenv("DROVER_RUNTIMES_MY_AGENT_GRACE", "2s")
	t.Setenv("DROVER_RUNTIMES_MY_AGENT_VERSION_ARGS", "-c,true")
	t.Setenv("DROVER_RUNTIMES_MY_AGENT_ENV_PASSTHROUGH", "MY_KEY,OTHER_KEY")
	t.Setenv("DROVER_RUNTIMES_OTHER_BINARY", "/opt/other")
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Runtimes["my-agent"]
	if rt.Binary != "/opt/my-agent" || rt.Input != "arg" || rt.PromptFlag != "-p" || rt.Timeout != 20*time.Minute ||
		rt.Grace != 2*time.Second || len(rt.EnvPassthrough) != 2 || strings.Join(rt.VersionArgs, " ") != "-c true" {
		t.Errorf("my-agent: %+v", rt)
	}
	if c.Runtimes["other"].Binary != "/opt/other" {
		t.Errorf("runtime from the environment: %+v", c.Runtimes["other"])
	}
}

// TestInvalid: every bad value is reported with its key.
func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"slots", "worker:\n  slots: 0\n", nil, "worker.slots"},
		{"slots type", "worker:\n  slots: many\n", nil, "slots"},
		{"unknown key", "wrker:\n  slots: 2\n", nil, "wrker"},
		{"unknown nested key", "worker:\n  slotz: 2\n", nil, "slotz"},
		{"log level", "log:\n  level: loud\n", nil, "log.level"},
		{"ack wait", "queue:\n  ack_wait: 10ms\n", nil, "queue.ack_wait"},
		{"heartbeat", "queue:\n  ack_wait: 10s\n  heartbeat: 20s\n", nil, "queue.heartbeat"},
		{"listen", "nats:\n  listen: nowhere\n", nil, "nats.listen"},
		{"url", "nats:\n  url: localhost\n", nil, "nats.url"},
		{"sync", "nats:\n  sync_interval: sometimes\n", nil, "nats.sync_interval"},
		{"pool", "worker:\n  pool: a.b\n", nil, "worker.pool"},
		{"default runtime", "defaults:\n  runtime: nosuch\n", nil, "defaults.runtime"},
		{"worker runtime", "worker:\n  runtimes: [nosuch]\n", nil, "worker.runtimes"},
		{"input", "runtimes:\n  x:\n    binary: x\n    input: carrier-pigeon\n", nil, "runtimes.x.input"},
		{"adapter", "runtimes:\n  x:\n    binary: x\n    adapter: magic\n", nil, "runtimes.x.adapter"},
		{"binary", "runtimes:\n  x:\n    args: [a]\n", nil, "runtimes.x.binary"},
		{"env slots", "", map[string]string{"DROVER_WORKER_SLOTS": "lots"}, "slots"},
		{"yaml", "worker: [\n", nil, "drover.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func TestClientURL(t *testing.T) {
	dir := t.TempDir()
	c := &Config{DataDir: dir, NATS: NATS{Listen: "127.0.0.1:4222"}}
	if got := c.ClientURL(); got != "nats://127.0.0.1:4222" {
		t.Errorf("without a url file: %s", got)
	}
	if err := os.WriteFile(c.NATSURLFile(), []byte("nats://127.0.0.1:5555\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.ClientURL(); got != "nats://127.0.0.1:5555" {
		t.Errorf("with a url file: %s", got)
	}
	c.NATS.URL = "nats://elsewhere:4222"
	if got := c.ClientURL(); got != "nats://elsewhere:4222" {
		t.Errorf("configured: %s", got)
	}
}

// TestBuiltinOverride: a configured runtime named like a built-in changes only
// the fields it sets.
func TestBuiltinOverride(t *testing.T) {
	file := writeFile(t, `
runtimes:
  claude-code:
    binary: /opt/claude/bin/claude
    env: ["CLAUDE_CODE_MAX_RETRIES=0"]
`)
	t.Setenv("DROVER_RUNTIMES_CLAUDE_CODE_MODEL", "sonnet")
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Runtimes["claude-code"]
	if rt.Binary != "/opt/claude/bin/claude" || rt.Model != "sonnet" || rt.ModelFlag != "--model" || rt.Output != "claude-stream-json" {
		t.Errorf("claude-code: %+v", rt)
	}
	if strings.Join(rt.Args, " ") != "--output-format stream-json --verbose --dangerously-skip-permissions" || rt.PromptFlag != "-p" {
		t.Errorf("built-in argv lost: %v %q", rt.Args, rt.PromptFlag)
	}
	if env := strings.Join(rt.Env, " "); !strings.Contains(env, "CLAUDE_CODE_MAX_RETRIES=0") || strings.Contains(env, "RETRIES=1") || !strings.Contains(env, "DISABLE_AUTOUPDATER=1") {
		t.Errorf("env not merged: %v", rt.Env)
	}
	if _, err := Load(LoadOptions{File: writeFile(t, "runtimes:\n  x:\n    binary: x\n    output: xml\n")}); err == nil || !strings.Contains(err.Error(), "runtimes.x.output") {
		t.Errorf("unknown output format: %v", err)
	}
}
