package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// leafKeys lists every key of Config whose type is kind-like, with a
// runtime and a project named x.
func leafKeys(match func(reflect.Type) bool) []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if match(t) {
			keys = append(keys, prefix)
			return
		}
		switch t.Kind() {
		case reflect.Map:
			walk(t.Elem(), prefix+".x")
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
				if tag == "" {
					continue
				}
				key := tag
				if prefix != "" {
					key = prefix + "." + tag
				}
				walk(f.Type, key)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return keys
}

// yamlFor writes key: value as nested YAML; runtime x gets a binary.
func yamlFor(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i == len(parts)-1 {
			b.WriteString(" " + value + "\n")
		} else {
			b.WriteString("\n")
		}
		if i == 1 && parts[0] == "runtimes" && len(parts) > 2 && parts[2] != "binary" {
			b.WriteString(strings.Repeat("  ", 2) + "binary: x\n")
		}
	}
	return b.String()
}

// TestDurationsNeedUnits: every duration key, from the file and from its
// variable, refuses a bare number and names the key and the source.
func TestDurationsNeedUnits(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	keys := leafKeys(func(t reflect.Type) bool { return t == durationType })
	if len(keys) < 14 {
		t.Fatalf("found only %d duration keys: %v", len(keys), keys)
	}
	known := knownVars()
	for _, key := range keys {
		file := writeFile(t, yamlFor(key, "90"))
		_, err := Load(LoadOptions{File: file})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key+": 90 has no unit: write a duration like 90s") ||
			!strings.Contains(err.Error(), "(from "+file+")") {
			t.Errorf("%s: 90 in the file: %v", key, err)
		}
		// A fraction without a unit too.
		if _, err := Load(LoadOptions{File: writeFile(t, yamlFor(key, "1.5"))}); err == nil || !strings.Contains(err.Error(), "1.5 has no unit") {
			t.Errorf("%s: 1.5 in the file: %v", key, err)
		}
		// With a unit it loads (bounds aside: 1s is inside all of them
		// except where 1s is too short, which the message then says).
		if _, err := Load(LoadOptions{File: writeFile(t, yamlFor(key, "2s"))}); err != nil && strings.Contains(err.Error(), "unit") {
			t.Errorf("%s: 2s in the file: %v", key, err)
		}
		env := envName(key)
		if !known[env] {
			continue // no variable (runtimes: by name below; projects: file only)
		}
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "90")
			_, err := Load(LoadOptions{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key+`: "90" has no unit`) || !strings.Contains(err.Error(), "(from $"+env+")") {
				t.Errorf("%s=90: %v", env, err)
			}
			t.Setenv(env, "soon")
			if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), `"soon" is not a duration`) {
				t.Errorf("%s=soon: %v", env, err)
			}
		})
	}
	// A runtime's duration from its variable.
	t.Setenv("DROVER_RUNTIMES_MY_AGENT_BINARY", "x")
	t.Setenv("DROVER_RUNTIMES_MY_AGENT_TIMEOUT", "90")
	if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), `runtimes.my-agent.timeout: "90" has no unit`) ||
		!strings.Contains(err.Error(), "$DROVER_RUNTIMES_MY_AGENT_TIMEOUT") {
		t.Errorf("runtime timeout from the environment: %v", err)
	}
}

// TestDurationZeroAndUnits: 0 needs no unit (it means unset), and units load.
func TestDurationZeroAndUnits(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{File: writeFile(t, "defaults:\n  timeout: 90s\n  retry:\n    initial_backoff: 0\n    max_backoff: \"0\"\nworker:\n  drain_timeout: 1m30s\n")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Defaults.Timeout != 90*time.Second || c.Defaults.Retry.InitialBackoff != 0 || c.Worker.DrainTimeout != 90*time.Second {
		t.Errorf("durations: %s %s %s", c.Defaults.Timeout, c.Defaults.Retry.InitialBackoff, c.Worker.DrainTimeout)
	}
}

// TestDurationFlag: a duration flag is parsed by pflag, which wants a unit
// too, and a flag's value is named as the flag's.
func TestDurationFlag(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Duration("drain-timeout", 0, "")
	if err := fs.Parse([]string{"--drain-timeout", "90"}); err == nil {
		t.Error("pflag took --drain-timeout 90")
	}
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Duration("drain-timeout", 0, "")
	if err := fs.Parse([]string{"--drain-timeout", "48h"}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(LoadOptions{Flags: fs, Bind: FlagBindings})
	if err == nil || !strings.Contains(err.Error(), "worker.drain_timeout: must be 0..24h0m0s (got 48h0m0s)") {
		t.Errorf("--drain-timeout 48h: %v", err)
	}
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("slots", "", "")
	_ = fs.Parse([]string{"--slots", "2.5"})
	if _, err := Load(LoadOptions{Flags: fs, Bind: FlagBindings}); err == nil || !strings.Contains(err.Error(), `worker.slots: must be a whole number (got "2.5") (from --slots)`) {
		t.Errorf("--slots 2.5 (a string flag): %v", err)
	}
}

// TestIntegersRefuseFractions: every integer key, from the file and its
// variable.
func TestIntegersRefuseFractions(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	keys := leafKeys(func(t reflect.Type) bool { return t != durationType && isInt(t.Kind()) })
	if len(keys) < 10 {
		t.Fatalf("found only %d integer keys: %v", len(keys), keys)
	}
	known := knownVars()
	for _, key := range keys {
		_, err := Load(LoadOptions{File: writeFile(t, yamlFor(key, "2.5"))})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key+": must be a whole number (got 2.5)") {
			t.Errorf("%s: 2.5: %v", key, err)
		}
		if _, err := Load(LoadOptions{File: writeFile(t, yamlFor(key, "true"))}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: true: %v", key, err)
		}
		if env := envName(key); known[env] {
			t.Setenv(env, "2.5")
			if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), key+`: must be a whole number`) || !strings.Contains(err.Error(), `(got "2.5") (from $`+env+")") {
				t.Errorf("%s=2.5: %v", env, err)
			}
			os.Unsetenv(env)
		}
	}
	// A whole number written as a float is that number.
	c, err := Load(LoadOptions{File: writeFile(t, "worker:\n  slots: 3.0\n")})
	if err != nil || c.Worker.Slots != 3 {
		t.Errorf("slots: 3.0: %v, %v", c, err)
	}
}

func TestBooleansStrict(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	if _, err := Load(LoadOptions{File: writeFile(t, "http:\n  pprof: 1\n")}); err == nil || !strings.Contains(err.Error(), "http.pprof: must be true or false (got 1)") {
		t.Errorf("pprof: 1: %v", err)
	}
	t.Setenv("DROVER_WORKER_REUSE_WORKTREES", "yes")
	if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), `worker.reuse_worktrees: must be true or false (got "yes")`) {
		t.Errorf("reuse_worktrees=yes: %v", err)
	}
	t.Setenv("DROVER_WORKER_REUSE_WORKTREES", "false")
	if c, err := Load(LoadOptions{}); err != nil || c.Worker.ReuseWorktrees {
		t.Errorf("reuse_worktrees=false: %v", err)
	}
	t.Setenv("DROVER_TRACING_SAMPLE_RATIO", "half")
	if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), `tracing.sample_ratio: must be a number (got "half")`) {
		t.Errorf("sample_ratio=half: %v", err)
	}
}

// TestUnknownVariables: a DROVER_* that is no key is refused with the
// closest name; Drover's own variables and Kubernetes' service links pass.
func TestUnknownVariables(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct{ name, want string }{
		{"DROVER_WRKER_SLOTS", "DROVER_WRKER_SLOTS: not a Drover variable; did you mean DROVER_WORKER_SLOTS?"},
		{"DROVER_NATS_UR", "did you mean DROVER_NATS_URL?"},
		{"DROVER_DEFAULTS_TIMOUT", "did you mean DROVER_DEFAULTS_TIMEOUT?"},
		{"DROVER_DEFAULTS_RETRY_JITTER", "DROVER_DEFAULTS_RETRY_JITTER: not a Drover variable: defaults.retry.jitter has no variable, set it in the config file"},
		{"DROVER_DEFAULTS_RETRY_FALLBACK", "defaults.retry.fallback has no variable"},
		{"DROVER_RUNTIMES_MY_AGENT_BINARYY", "did you mean DROVER_RUNTIMES_MY_AGENT_BINARY?"},
		{"DROVER_RUNTIMES_X_LIMITS_CPU_SECONDS", "not a Drover variable"},
		{"DROVER_SOMETHING_ELSE_ENTIRELY_UNRELATED", "DROVER_SOMETHING_ELSE_ENTIRELY_UNRELATED: not a Drover variable (docs/config.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, "2")
			_, err := Load(LoadOptions{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		})
	}
	for _, name := range []string{"DROVER_CONFIG_UNUSED_X", "DROVER_FLOW_ID", "DROVER_TASK_ID", "DROVER_ATTEMPT_ID", "DROVER_WORKTREE", "DROVER_ROLE",
		"DROVER_CHAOS", "DROVER_CHAOS_SEED", "DROVER_BENCH_ANYTHING", "DROVER_E2E_CLI_CACHE", "DROVER_TEST_X",
		"DROVER_NATS_SERVICE_HOST", "DROVER_NATS_SERVICE_PORT", "DROVER_NATS_SERVICE_PORT_CLIENT", "DROVER_CONTROLLER_PORT",
		"DROVER_NATS_PORT_4222_TCP", "DROVER_NATS_PORT_4222_TCP_ADDR", "DROVER_CONTROLLER_PORT_8080_TCP_PROTO"} {
		if name == "DROVER_CONFIG_UNUSED_X" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "1")
			if _, err := Load(LoadOptions{}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	// An empty variable is no setting.
	t.Setenv("DROVER_WRKER_SLOTS", "")
	if _, err := Load(LoadOptions{}); err != nil {
		t.Errorf("empty unknown variable: %v", err)
	}
}

// TestServerConfigVariables: the variables the embedded server's config
// (and what it includes) refers to are the operator's, not refused.
func TestServerConfigVariables(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "perm.conf"), []byte("DROVER_X = { publish: \">\" }\nother: ${DROVER_INCLUDED_PASSWORD}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("authorization {\n  include \"perm.conf\"\n  users = [{user: c, password: $DROVER_CONTROLLER_PASSWORD}]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CONTROLLER_PASSWORD", "p")
	t.Setenv("DROVER_INCLUDED_PASSWORD", "p")
	t.Setenv("DROVER_NOT_REFERENCED", "p")
	_, err := Load(LoadOptions{File: writeFile(t, "nats:\n  server_config: "+conf+"\n")})
	if err == nil || !strings.Contains(err.Error(), "DROVER_NOT_REFERENCED") ||
		strings.Contains(err.Error(), "DROVER_CONTROLLER_PASSWORD") || strings.Contains(err.Error(), "DROVER_INCLUDED_PASSWORD") {
		t.Errorf("server config variables: %v", err)
	}
}

// TestBounds: every bounded number is refused outside its bound, with the
// bound in the message.
func TestBounds(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct{ file, want string }{
		{"worker:\n  slots: 1025\n", "worker.slots: must be 1..1024 (got 1025)"},
		{"worker:\n  slots: 100000\n", "worker.slots: must be 1..1024 (got 100000)"},
		{"defaults:\n  max_parallel: 10001\n", "defaults.max_parallel: must be 0..10000 (got 10001)"},
		{"projects:\n  p:\n    max_parallel: 10001\n", "projects.p.max_parallel: must be 0..10000"},
		{"controller:\n  max_parallel: 100001\n", "controller.max_parallel: must be 0..100000 (got 100001)"},
		{"controller:\n  gc_percent: 1001\n", "controller.gc_percent: must be 10..1000"},
		{"nats:\n  replicas: 6\n", "nats.replicas: must be 1..5"},
		{"defaults:\n  retry:\n    max_attempts: 101\n", "defaults.retry.max_attempts: must be 1..100, or 0 to inherit (got 101)"},
		{"defaults:\n  retry:\n    coefficient: 101\n", "defaults.retry.coefficient: must be 1..100"},
		{"defaults:\n  retry:\n    coefficient: .nan\n", "defaults.retry.coefficient: must be 1..100"},
		{"defaults:\n  retry:\n    fallback: [demo, demo]\n", "defaults.retry.fallback: demo is listed twice"},
		{"defaults:\n  retry:\n    fallback: [" + strings.Repeat("demo, ", 16) + "demo]\n", "defaults.retry.fallback: 17 runtimes; the limit is 16"},
		{"defaults:\n  timeout: 169h\n", "defaults.timeout: must be above 0 and at most 168h0m0s (got 169h0m0s)"},
		{"projects:\n  p:\n    timeout: 200h\n", "projects.p.timeout: must be 0..168h0m0s"},
		{"projects:\n  p:\n    args: [" + strings.Repeat("a, ", 64) + "a]\n", "projects.p.args: 65 arguments; the limit is 64"},
		{"queue:\n  ack_wait: 2h\n", "queue.ack_wait: must be 1s..1h0m0s"},
		{"nats:\n  dedup_window: 25h\n", "nats.dedup_window: must be 1s..24h0m0s (got 25h0m0s)"},
		{"nats:\n  dedup_window: 10ms\n", "nats.dedup_window: must be 1s..24h0m0s (got 10ms)"},
		{"worker:\n  drain_timeout: 25h\n", "worker.drain_timeout: must be 0..24h0m0s"},
		{"runtimes:\n  x:\n    binary: x\n    max_output_size: 67108865\n", "runtimes.x.max_output_size: must be 1024..67108864 bytes"},
		{"runtimes:\n  x:\n    binary: x\n    grace: 200h\n", "runtimes.x.grace: must be 0..168h0m0s"},
		{"runtimes:\n  x:\n    binary: x\n    limits:\n      open_files: 2000000\n", "runtimes.x.limits.open_files: must be 0..1048576"},
		{"runtimes:\n  x:\n    binary: x\n    limits:\n      address_space: 4096\n", "runtimes.x.limits.address_space: must be 0 (unset) or at least 67108864 bytes, 64 MiB (got 4096)"},
		{"runtimes:\n  x:\n    binary: x\n    limits:\n      file_size: 10\n", "runtimes.x.limits.file_size: must be 0 (unset) or at least 1048576 bytes"},
		{"runtimes:\n  x:\n    binary: x\n    limits:\n      open_files: -1\n", "open_files"},
	} {
		_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v\nwant %q", tc.file, err, tc.want)
		}
	}
	// The bounds themselves are accepted.
	if _, err := Load(LoadOptions{File: writeFile(t, "worker:\n  slots: 1024\ndefaults:\n  max_parallel: 10000\n  timeout: 168h\ncontroller:\n  max_parallel: 100000\nqueue:\n  ack_wait: 1h\n")}); err != nil {
		t.Errorf("at the bounds: %v", err)
	}
}

// TestConfigFileBounded: the config file is read with a bound, and what is
// not a regular file is refused before it is opened.
func TestConfigFileBounded(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(1 << 30)
	f.Close()
	for path, want := range map[string]string{
		fifo:        "is a named pipe (FIFO), not a regular file",
		"/dev/zero": "/dev/zero: is a character device",
		dir:         "is a directory",
		big:         "1.0 GiB is larger than the limit of 4.0 MiB",
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(LoadOptions{File: path}); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Errorf("--config %s: %v, want %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("--config %s: Load hung", path)
		}
	}
	// Files named in the configuration, which libraries read whole.
	for _, key := range []string{"server_config", "nkey_file", "creds_file"} {
		_, err := Load(LoadOptions{File: writeFile(t, "nats:\n  "+key+": /dev/zero\n")})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nats."+key+": /dev/zero: is a character device") {
			t.Errorf("nats.%s: /dev/zero: %v", key, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "[::1]": true, "127.1.2.3": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false} {
		if got := Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %t", host, got)
		}
	}
}

func TestInsecureHTTP(t *testing.T) {
	for listen, want := range map[string]bool{"": false, "127.0.0.1:9090": false, "localhost:0": false, ":9090": true, "0.0.0.0:1": true, "10.1.2.3:80": true} {
		c := &Config{HTTP: HTTP{Listen: listen, Pprof: true}}
		if got := c.InsecureHTTP(); got != want {
			t.Errorf("pprof on %q: InsecureHTTP = %t", listen, got)
		}
		c.HTTP.Pprof = false
		if c.InsecureHTTP() {
			t.Errorf("no pprof on %q: InsecureHTTP", listen)
		}
	}
}
