package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
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
	if c.Worker.MinFreeDisk != 1<<30 || c.Worker.DrainTimeout != 30*time.Second || c.Worker.KeepFailedWorktrees != 24*time.Hour {
		t.Errorf("worker disk and drain defaults: %+v", c.Worker)
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

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "1048576": 1 << 20, "512MiB": 512 << 20, "2GB": 2e9, "1.5 GiB": 3 << 29} {
		t.Setenv("DROVER_WORKER_MIN_FREE_DISK", in)
		c, err := Load(LoadOptions{})
		if err != nil || c.Worker.MinFreeDisk != want {
			t.Errorf("min_free_disk %q = %d, %v; want %d", in, c.Worker.MinFreeDisk, err, want)
		}
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

func TestHTTPListen(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Listen != "" || c.HTTP.Pprof {
		t.Errorf("http default = %+v, want off and no profiler", c.HTTP)
	}
	t.Setenv("DROVER_HTTP_PPROF", "true")
	if c, err = Load(LoadOptions{}); err != nil || !c.HTTP.Pprof {
		t.Fatalf("env: pprof = %v, err %v", c.HTTP.Pprof, err)
	}
	t.Setenv("DROVER_HTTP_LISTEN", "127.0.0.1:9090")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("http-listen", "", "")
	if c, err = Load(LoadOptions{Flags: fs, Bind: FlagBindings}); err != nil || c.HTTP.Listen != "127.0.0.1:9090" {
		t.Fatalf("env: listen = %q, err %v", c.HTTP.Listen, err)
	}
	if err := fs.Parse([]string{"--http-listen", ":9100"}); err != nil {
		t.Fatal(err)
	}
	// With the profiler on, every interface needs the insecure switch.
	if _, err = Load(LoadOptions{Flags: fs, Bind: FlagBindings}); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "http.listen: :9100 takes connections from other hosts and http.pprof is on") {
		t.Fatalf("pprof on every interface: %v", err)
	}
	t.Setenv("DROVER_INSECURE_LISTEN", "true")
	if c, err = Load(LoadOptions{Flags: fs, Bind: FlagBindings}); err != nil || c.HTTP.Listen != ":9100" || !c.InsecureListen {
		t.Fatalf("flag: listen = %q, err %v", c.HTTP.Listen, err)
	}
	// Without the profiler, metrics and health may be served to all.
	t.Setenv("DROVER_INSECURE_LISTEN", "")
	t.Setenv("DROVER_HTTP_PPROF", "false")
	if c, err = Load(LoadOptions{Flags: fs, Bind: FlagBindings}); err != nil || c.HTTP.Listen != ":9100" {
		t.Fatalf("no pprof: listen = %q, err %v", c.HTTP.Listen, err)
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
		{"http listen", "http:\n  listen: nowhere\n", nil, "http.listen"},
		{"http listen env", "", map[string]string{"DROVER_HTTP_LISTEN": "host:port"}, "http.listen"},
		{"sync", "nats:\n  sync_interval: sometimes\n", nil, "nats.sync_interval"},
		{"pool", "worker:\n  pool: a.b\n", nil, "worker.pool"},
		{"default runtime", "defaults:\n  runtime: nosuch\n", nil, "defaults.runtime"},
		{"worker runtime", "worker:\n  runtimes: [nosuch]\n", nil, "worker.runtimes"},
		{"input", "runtimes:\n  x:\n    binary: x\n    input: carrier-pigeon\n", nil, "runtimes.x.input"},
		{"adapter", "runtimes:\n  x:\n    binary: x\n    adapter: magic\n", nil, "runtimes.x.adapter"},
		{"binary", "runtimes:\n  x:\n    args: [a]\n", nil, "runtimes.x.binary"},
		{"env slots", "", map[string]string{"DROVER_WORKER_SLOTS": "lots"}, "slots"},
		{"yaml", "worker: [\n", nil, "drover.yaml"},
		{"min free disk", "worker:\n  min_free_disk: lots\n", nil, "is not a size"},
		{"min free disk env", "", map[string]string{"DROVER_WORKER_MIN_FREE_DISK": "-1GiB"}, "min_free_disk"},
		{"drain timeout", "worker:\n  drain_timeout: -1s\n", nil, "worker.drain_timeout"},
		{"keep failed", "worker:\n  keep_failed_worktrees: -1h\n", nil, "worker.keep_failed_worktrees"},
		{"passthrough add", "runtimes:\n  codex:\n    env_passthrough_add: [\"A=B\"]\n", nil, "runtimes.codex.env_passthrough_add"},
		{"provider config", "runtimes:\n  x:\n    binary: x\n    provider_config: aider\n", nil, "runtimes.x.provider_config"},
		{"own retry timeout", "runtimes:\n  gemini:\n    own_retry_timeout: -1s\n", nil, "runtimes.gemini"},
		// A negative limit would wrap around to no limit at all.
		{"cpu seconds", "runtimes:\n  claude-code:\n    limits:\n      cpu_seconds: -1\n", nil, "runtimes.claude-code.limits.cpu_seconds: must not be negative (got -1)"},
		{"open files", "runtimes:\n  claude-code:\n    limits:\n      open_files: -5\n", nil, "runtimes.claude-code.limits.open_files: must not be negative (got -5)"},
		{"address space", "runtimes:\n  codex:\n    limits:\n      address_space: -1\n", nil, "runtimes.codex.limits.address_space: must not be negative (got -1)"},
		{"file size", "runtimes:\n  codex:\n    limits:\n      file_size: \"-1\"\n", nil, "runtimes.codex.limits.file_size: must not be negative (got -1)"},
		{"a fraction below zero", "runtimes:\n  codex:\n    limits:\n      cpu_seconds: -0.5\n", nil, "limits.cpu_seconds: must not be negative"},
		// A model reaches the CLI's argv after its model flag: never an option.
		{"project model", "projects:\n  p:\n    repo: /srv/p\n    model: --yolo\n", nil, `projects.p.model: model "--yolo" starts with '-'`},
		{"project validator model", "projects:\n  p:\n    repo: /srv/p\n    validator_model: -x\n", nil, "projects.p.validator_model: model \"-x\" starts with '-'"},
		{"runtime model", "runtimes:\n  claude-code:\n    model: --dangerously-skip-permissions\n", nil, "runtimes.claude-code.model: model \"--dangerously-skip-permissions\" starts with '-'"},
		{"runtime model env", "", map[string]string{"DROVER_RUNTIMES_CODEX_MODEL": "--yolo"}, "runtimes.codex.model"},
		{"runtime models", "runtimes:\n  codex:\n    models: [gpt-5, -c]\n", nil, "runtimes.codex.models[1]"},
		{"native model", "runtimes:\n  n:\n    adapter: native\n    provider: openai\n    base_url: http://localhost:8000/v1\n    model: --x\n", nil, "runtimes.n.model"},
		{"model with a newline", "projects:\n  p:\n    repo: /srv/p\n    model: \"a\\nb\"\n", nil, "projects.p.model: model \"a\\nb\" contains control characters"},
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

// TestOperatorURL: an operator command dials nats.url, else the URL in the
// data dir's nats.url; only the default data dir falls back to
// nats.listen, and what is missing or wrong is named.
func TestOperatorURL(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	listen := NATS{Listen: "127.0.0.1:4222"}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		c       Config
		file    string // nats.url's content, if any
		want    string
		wantErr error
		errText string
	}{
		{"nats.url set", Config{DataDir: "/nonexistent", NATS: NATS{URL: "nats://elsewhere:4222"}}, "", "nats://elsewhere:4222", nil, ""},
		{"the file", Config{DataDir: dir, NATS: listen}, "nats://127.0.0.1:5555\n", "nats://127.0.0.1:5555", nil, ""},
		{"the default dir without the file", Config{DataDir: DefaultDataDir(), NATS: listen}, "", "nats://127.0.0.1:4222", nil, ""},
		{"another dir without the file", Config{DataDir: dir, NATS: listen}, "", "", ErrNoNATSURL, "data dir " + dir + " holds no nats.url"},
		{"a dir that does not exist", Config{DataDir: "/nonexistent/drover", NATS: listen}, "", "", ErrNoNATSURL, "data dir /nonexistent/drover does not exist"},
		{"garbage in the file", Config{DataDir: dir, NATS: listen}, "\x1b[2J", "", ErrInvalid, filepath.Join(dir, "nats.url") + `: holds "\x1b[2J", not a NATS URL`},
		{"a URL of another scheme", Config{DataDir: dir, NATS: listen}, "http://127.0.0.1:4222", "", ErrInvalid, "not a NATS URL"},
		{"an empty file", Config{DataDir: dir, NATS: listen}, "\n", "", ErrInvalid, "not a NATS URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "nats.url"))
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "nats.url"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := tc.c.OperatorURL()
			if got != tc.want || !errors.Is(err, tc.wantErr) || tc.wantErr != nil && !strings.Contains(fmt.Sprint(err), tc.errText) {
				t.Errorf("OperatorURL() = %q, %v; want %q, %v (%q)", got, err, tc.want, tc.wantErr, tc.errText)
			}
		})
	}
	fifo := filepath.Join(dir, "nats.url")
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Config{DataDir: dir, NATS: listen}).OperatorURL(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a FIFO at nats.url: %v, want it refused unread", err)
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

// env_passthrough_add extends a built-in's list without repeating it, from
// a file or a DROVER_RUNTIMES_<NAME>_ENV_PASSTHROUGH_ADD variable; the
// built-ins read their CLI's provider configuration and bound its retries.
func TestPassthroughAdd(t *testing.T) {
	t.Setenv("DROVER_RUNTIMES_PI_ENV_PASSTHROUGH_ADD", "PI_GATEWAY_KEY")
	c, err := Load(LoadOptions{File: writeFile(t, "runtimes:\n  codex:\n    env_passthrough_add: [MY_GATEWAY_KEY, OPENAI_API_KEY]\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Runtimes["codex"].Passthrough(), " "); got != "OPENAI_API_KEY CODEX_HOME MY_GATEWAY_KEY" {
		t.Errorf("codex passthrough %q", got)
	}
	if got := c.Runtimes["pi"].Passthrough(); got[len(got)-1] != "PI_GATEWAY_KEY" || len(got) != 5 {
		t.Errorf("pi passthrough %q", got)
	}
	for name, want := range map[string]string{"codex": "codex", "pi": "pi", "opencode": "opencode", "kilo": "kilo", "claude-code": "", "gemini": "", "copilot": ""} {
		if rt := c.Runtimes[name]; rt.ProviderConfig != want || rt.OwnRetryTimeout != DefaultOwnRetryTimeout {
			t.Errorf("%s: provider_config %q, own_retry_timeout %s", name, rt.ProviderConfig, rt.OwnRetryTimeout)
		}
	}
}

// TestProjects: projects and the policy keys of defaults and controller
// decode from a file, with durations and the jitter pointer.
func TestProjects(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	file := writeFile(t, `
defaults:
  runtime: demo
  validator: demo-review
  max_parallel: 4
  retry:
    max_attempts: 5
    initial_backoff: 2s
    coefficient: 3
    max_backoff: 1m
    jitter: 0.1
    retry_on: [RATE_LIMITED, VERIFICATION_FAILED]
    fallback: [codex]
controller:
  max_parallel: 16
projects:
  web:
    repo: git@github.com:acme/web.git
    runtime: claude-code
    model: sonnet
    args: [--max-turns, "30"]
    validator: codex
    validator_model: o3
    review: true
    timeout: 45m
    max_parallel: 2
    retry:
      max_attempts: 4
      initial_backoff: 30s
      max_backoff: 10m
      jitter: 0
      fallback: [codex, gemini]
  docs:
    repo: /srv/git/docs.git
    runtime: demo
    review: false
`)
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Defaults
	if d.Validator != "demo-review" || d.MaxParallel != 4 || c.Controller.MaxParallel != 16 {
		t.Errorf("defaults: validator %q max_parallel %d, controller.max_parallel %d", d.Validator, d.MaxParallel, c.Controller.MaxParallel)
	}
	if c.Controller.GCPercent != 50 {
		t.Errorf("controller.gc_percent %d, want the default 50", c.Controller.GCPercent)
	}
	r := d.Retry
	if r.MaxAttempts != 5 || r.InitialBackoff != 2*time.Second || r.Coefficient != 3 || r.MaxBackoff != time.Minute ||
		r.Jitter == nil || *r.Jitter != 0.1 || fmt.Sprint(r.RetryOn) != "[RATE_LIMITED VERIFICATION_FAILED]" ||
		strings.Join(r.Fallback, ",") != "codex" {
		t.Errorf("defaults.retry: %+v", r)
	}
	if got := strings.Join(c.ProjectNames(), ","); got != "docs,web" {
		t.Fatalf("projects: %s", got)
	}
	web := c.Projects["web"]
	if web.Repo != "git@github.com:acme/web.git" || web.Runtime != "claude-code" || web.Model != "sonnet" ||
		strings.Join(web.Args, " ") != "--max-turns 30" || web.Validator != "codex" || web.ValidatorModel != "o3" ||
		web.Review == nil || !*web.Review || web.Timeout != 45*time.Minute || web.MaxParallel != 2 {
		t.Errorf("projects.web: %+v", web)
	}
	wr := web.Retry
	if wr.MaxAttempts != 4 || wr.InitialBackoff != 30*time.Second || wr.MaxBackoff != 10*time.Minute || wr.Coefficient != 0 ||
		len(wr.RetryOn) != 0 || strings.Join(wr.Fallback, ",") != "codex,gemini" {
		t.Errorf("projects.web.retry: %+v", wr)
	}
	if wr.Jitter == nil || *wr.Jitter != 0 {
		t.Errorf("projects.web.retry.jitter: %v, want a pointer to 0 (set, no jitter)", wr.Jitter)
	}
	docs := c.Projects["docs"]
	if docs.Repo != "/srv/git/docs.git" || docs.Runtime != "demo" || docs.Review == nil || *docs.Review {
		t.Errorf("projects.docs: %+v", docs)
	}
	if docs.Retry.Jitter != nil || docs.Timeout != 0 || docs.MaxParallel != 0 || docs.Validator != "" {
		t.Errorf("projects.docs: unset fields should stay zero (jitter nil): %+v", docs)
	}
	if docs.Retry.Spec() != nil {
		t.Errorf("projects.docs.retry.Spec() = %+v, want nil", docs.Retry.Spec())
	}
}

// TestProjectDefaults: without projects, policy or controller keys, the new
// fields are zero: no validator, no limits, and a retry that sets nothing.
func TestProjectDefaults(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Projects) != 0 || c.Defaults.Validator != "" || c.Defaults.MaxParallel != 0 || c.Controller.MaxParallel != 0 {
		t.Errorf("defaults: projects %v, validator %q, max_parallel %d/%d", c.Projects, c.Defaults.Validator,
			c.Defaults.MaxParallel, c.Controller.MaxParallel)
	}
	if s := c.Defaults.Retry.Spec(); s != nil {
		t.Errorf("defaults.retry.Spec() = %+v, want nil", s)
	}
	if rt, ok := c.Runtimes["demo-review"]; !ok || rt.Binary != "demo-agent" || strings.Join(rt.Args, " ") != "--review" ||
		rt.Input != "stdin" || rt.Output != "text" {
		t.Errorf("builtin demo-review runtime: %+v", rt)
	}
}

// TestRetrySpec: Spec maps each unset (zero) field to nil, keeps a set
// jitter of 0, and returns nil when nothing is set.
func TestRetrySpec(t *testing.T) {
	zero, half := 0.0, 0.5
	for _, tc := range []struct {
		name string
		in   Retry
		nil_ bool
		want string // the set fields, in declaration order
	}{
		{"nothing set", Retry{}, true, ""},
		{"empty lists", Retry{RetryOn: []drovertype.ErrorClass{}, Fallback: []string{}}, true, ""},
		{"max_attempts", Retry{MaxAttempts: 1}, false, "max_attempts=1"},
		{"backoffs", Retry{InitialBackoff: time.Second, MaxBackoff: time.Minute}, false, "initial_backoff=1s max_backoff=1m0s"},
		{"coefficient", Retry{Coefficient: 1.5}, false, "coefficient=1.5"},
		{"jitter 0 is set", Retry{Jitter: &zero}, false, "jitter=0"},
		{"jitter", Retry{Jitter: &half}, false, "jitter=0.5"},
		{"lists", Retry{RetryOn: []drovertype.ErrorClass{"RATE_LIMITED"}, Fallback: []string{"codex"}}, false, "retry_on=[RATE_LIMITED] fallback=[codex]"},
		{"everything", Retry{MaxAttempts: 3, InitialBackoff: 10 * time.Second, Coefficient: 2, MaxBackoff: 5 * time.Minute,
			Jitter: &half, RetryOn: []drovertype.ErrorClass{"RUNTIME_TIMEOUT"}, Fallback: []string{"gemini"}}, false,
			"max_attempts=3 initial_backoff=10s coefficient=2 max_backoff=5m0s jitter=0.5 retry_on=[RUNTIME_TIMEOUT] fallback=[gemini]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in.Spec()
			if tc.nil_ {
				if s != nil {
					t.Fatalf("Spec() = %+v, want nil", s)
				}
				return
			}
			if s == nil {
				t.Fatal("Spec() = nil")
			}
			var got []string
			if s.MaxAttempts != nil {
				got = append(got, fmt.Sprintf("max_attempts=%d", *s.MaxAttempts))
			}
			if s.InitialBackoff != nil {
				got = append(got, "initial_backoff="+s.InitialBackoff.String())
			}
			if s.Coefficient != nil {
				got = append(got, fmt.Sprintf("coefficient=%g", *s.Coefficient))
			}
			if s.MaxBackoff != nil {
				got = append(got, "max_backoff="+s.MaxBackoff.String())
			}
			if s.Jitter != nil {
				got = append(got, fmt.Sprintf("jitter=%g", *s.Jitter))
			}
			if len(s.RetryOn) > 0 {
				got = append(got, fmt.Sprintf("retry_on=%v", s.RetryOn))
			}
			if len(s.Fallback) > 0 {
				got = append(got, fmt.Sprintf("fallback=%v", s.Fallback))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("Spec() sets %q, want %q", g, tc.want)
			}
		})
	}
	// The spec does not alias the Retry's counters.
	r := Retry{MaxAttempts: 2}
	s := r.Spec()
	r.MaxAttempts = 9
	if *s.MaxAttempts != 2 {
		t.Errorf("Spec aliases MaxAttempts: %d", *s.MaxAttempts)
	}
}

// TestInvalidPolicy: every bad project, retry or limit is reported with
// its key (and, for the project keys, the project's).
func TestInvalidPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"project runtime", "projects:\n  web:\n    runtime: nosuch\n", nil, []string{"projects.web.runtime", `"nosuch"`}},
		{"project validator", "projects:\n  web:\n    validator: nosuch\n", nil, []string{"projects.web.validator", `"nosuch"`}},
		{"project name", "projects:\n  my_web:\n    runtime: demo\n", nil, []string{"projects.my_web", "project name"}},
		{"project name dash", "projects:\n  -web:\n    runtime: demo\n", nil, []string{"projects.-web", "project name"}},
		{"project unknown field", "projects:\n  web:\n    rutime: demo\n", nil, []string{"rutime"}},
		{"project max_parallel", "projects:\n  web:\n    max_parallel: -1\n", nil, []string{"projects.web", "max_parallel"}},
		{"project timeout", "projects:\n  web:\n    timeout: -5s\n", nil, []string{"projects.web", "timeout"}},
		{"defaults max_parallel", "defaults:\n  max_parallel: -1\n", nil, []string{"defaults.max_parallel"}},
		{"controller max_parallel", "controller:\n  max_parallel: -2\n", nil, []string{"controller.max_parallel"}},
		{"controller gc_percent", "controller:\n  gc_percent: 5\n", nil, []string{"controller.gc_percent", "10..1000"}},
		{"env controller gc_percent", "", map[string]string{"DROVER_CONTROLLER_GC_PERCENT": "2000"}, []string{"controller.gc_percent"}},
		{"defaults validator", "defaults:\n  validator: nosuch\n", nil, []string{"defaults.validator", `"nosuch"`}},
		{"max_attempts", "defaults:\n  retry:\n    max_attempts: 101\n", nil, []string{"defaults.retry.max_attempts", "101"}},
		{"max_attempts negative", "defaults:\n  retry:\n    max_attempts: -1\n", nil, []string{"defaults.retry.max_attempts"}},
		{"project max_attempts", "projects:\n  web:\n    retry:\n      max_attempts: 101\n", nil, []string{"projects.web.retry.max_attempts"}},
		{"backoffs out of order", "defaults:\n  retry:\n    initial_backoff: 10m\n    max_backoff: 1m\n", nil, []string{"defaults.retry.initial_backoff", "max_backoff"}},
		{"negative backoff", "defaults:\n  retry:\n    max_backoff: -1s\n", nil, []string{"defaults.retry"}},
		{"coefficient", "defaults:\n  retry:\n    coefficient: 0.5\n", nil, []string{"defaults.retry.coefficient", "0.5"}},
		{"jitter", "defaults:\n  retry:\n    jitter: 1.5\n", nil, []string{"defaults.retry.jitter", "1.5"}},
		{"project jitter", "projects:\n  web:\n    retry:\n      jitter: -0.1\n", nil, []string{"projects.web.retry.jitter"}},
		{"retry_on lower case", "defaults:\n  retry:\n    retry_on: [rate_limited]\n", nil, []string{"defaults.retry.retry_on", `"rate_limited"`}},
		{"fallback", "defaults:\n  retry:\n    fallback: [nosuch]\n", nil, []string{"defaults.retry.fallback", `"nosuch"`}},
		{"project fallback", "projects:\n  web:\n    retry:\n      fallback: [demo, nosuch]\n", nil, []string{"projects.web.retry.fallback", `"nosuch"`}},
		{"retry unknown field", "defaults:\n  retry:\n    max_attempt: 3\n", nil, []string{"max_attempt"}},
		{"env max_attempts", "", map[string]string{"DROVER_DEFAULTS_RETRY_MAX_ATTEMPTS": "101"}, []string{"defaults.retry.max_attempts"}},
		{"env max_attempts type", "", map[string]string{"DROVER_DEFAULTS_RETRY_MAX_ATTEMPTS": "many"}, []string{"max_attempts"}},
		{"env controller max_parallel", "", map[string]string{"DROVER_CONTROLLER_MAX_PARALLEL": "-1"}, []string{"controller.max_parallel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestPolicyEnv: the scalar policy keys have DROVER_* forms, which win over
// the file.
func TestPolicyEnv(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	file := writeFile(t, "defaults:\n  retry:\n    max_attempts: 3\n    retry_on: [RATE_LIMITED]\n")
	t.Setenv("DROVER_DEFAULTS_RETRY_MAX_ATTEMPTS", "5")
	t.Setenv("DROVER_DEFAULTS_RETRY_INITIAL_BACKOFF", "2s")
	t.Setenv("DROVER_DEFAULTS_RETRY_COEFFICIENT", "1.5")
	t.Setenv("DROVER_DEFAULTS_RETRY_MAX_BACKOFF", "90s")
	t.Setenv("DROVER_DEFAULTS_VALIDATOR", "demo-review")
	t.Setenv("DROVER_DEFAULTS_MAX_PARALLEL", "3")
	t.Setenv("DROVER_CONTROLLER_MAX_PARALLEL", "8")
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Defaults.Retry
	if r.MaxAttempts != 5 || r.InitialBackoff != 2*time.Second || r.Coefficient != 1.5 || r.MaxBackoff != 90*time.Second {
		t.Errorf("defaults.retry from the environment: %+v", r)
	}
	if fmt.Sprint(r.RetryOn) != "[RATE_LIMITED]" {
		t.Errorf("defaults.retry.retry_on from the file lost: %v", r.RetryOn)
	}
	if c.Defaults.Validator != "demo-review" || c.Defaults.MaxParallel != 3 || c.Controller.MaxParallel != 8 {
		t.Errorf("from the environment: validator %q, max_parallel %d, controller.max_parallel %d",
			c.Defaults.Validator, c.Defaults.MaxParallel, c.Controller.MaxParallel)
	}
	if s := r.Spec(); s == nil || s.MaxAttempts == nil || *s.MaxAttempts != 5 {
		t.Errorf("Spec() of the environment's retry: %+v", s)
	}
}

func TestConsole(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Console.Enabled || c.Console.Token != "" || c.Console.SessionTTL != 12*time.Hour {
		t.Fatalf("console defaults %+v", c.Console)
	}
	t.Setenv("DROVER_CONSOLE_TOKEN", "a-token-long-enough")
	if c, err = Load(LoadOptions{}); err != nil || c.Console.Token.Value() != "a-token-long-enough" {
		t.Fatalf("token from the environment: %v", err)
	}
	if s := fmt.Sprintf("%v %+v", c.Console.Token, c.Console); strings.Contains(s, "long-enough") {
		t.Fatalf("the token is printed: %s", s)
	}
	hash := "$2a$04$Gy6ZvN1t8bQ2v0QbR0nG2e3lJ1b7u1s1bq9Qh3b6Jm6i2dBq5XJ9K" // a hash's shape, cost 4
	f := writeFile(t, "console:\n  users:\n    - {name: ann, password_hash: '"+hash+"'}\n")
	if c, err = Load(LoadOptions{File: f}); err != nil || len(c.Console.Users) != 1 || c.Console.Users[0].Name != "ann" {
		t.Fatalf("users: %+v %v", c.Console.Users, err)
	}
	for body, want := range map[string]string{
		"console:\n  token: short\n":                                                                                               "console.token: must be at least 16",
		"console:\n  users:\n    - {name: ann, password_hash: plain}\n":                                                            "console.users[0].password_hash: is not a bcrypt hash",
		"console:\n  users:\n    - {name: '', password_hash: '" + hash + "'}\n":                                                    "console.users[0].name",
		"console:\n  users:\n    - {name: ann, password_hash: '" + hash + "'}\n    - {name: ann, password_hash: '" + hash + "'}\n": "is listed twice",
		"console:\n  session_ttl: 10s\n":                                                                                           "console.session_ttl: must be at least 1m",
	} {
		t.Setenv("DROVER_CONSOLE_TOKEN", "")
		_, err := Load(LoadOptions{File: writeFile(t, body)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// A runtime marshals by its config keys, durations as strings, and reads
// back as configuration.
func TestRuntimeJSON(t *testing.T) {
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.Runtimes["claude-code"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"env_passthrough":["ANTHROPIC_API_KEY"`, `"timeout":"30m0s"`, `"grace":"5s"`, `"own_retry_timeout":"15s"`,
		`"no_output_timeout":"0s"`, `"limits":{"address_space":0`, `"home_files":[".claude/.credentials.json"`, `"output":"claude-stream-json"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "EnvPassthrough") || strings.Contains(string(b), "1800000000000") {
		t.Errorf("Go field names or nanoseconds: %s", b)
	}
	// And back: the JSON is valid configuration for the same runtime.
	file := filepath.Join(t.TempDir(), "drover.json")
	if err := os.WriteFile(file, []byte(`{"runtimes":{"again":`+string(b)+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	v.SetConfigFile(file)
	if err := v.ReadInConfig(); err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := v.Unmarshal(&back, func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", back.Runtimes["again"]), fmt.Sprintf("%+v", c.Runtimes["claude-code"]); got != want {
		t.Errorf("read back:\n%s\nwant\n%s", got, want)
	}
}
