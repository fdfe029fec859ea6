package adapter

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/supervise"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent")
	if err := exectest.WriteExecutable(p, []byte("#!/bin/sh\n"+body)); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInitialize(t *testing.T) {
	ok := NewCommand("x", config.Runtime{Binary: script(t, `echo "agent 1.2.3"; echo more`), VersionArgs: []string{"--version"}})
	info, err := ok.Initialize(context.Background())
	if err != nil || info.Version != "agent 1.2.3" {
		t.Fatalf("info %+v, err %v", info, err)
	}
	_, err = NewCommand("x", config.Runtime{Binary: "/nonexistent/agent"}).Initialize(context.Background())
	if !errors.Is(err, ErrBinaryNotFound) {
		t.Errorf("missing binary: %v", err)
	}
	_, err = NewCommand("x", config.Runtime{Binary: "no-such-agent-in-path"}).Initialize(context.Background())
	if !errors.Is(err, ErrBinaryNotFound) {
		t.Errorf("binary not in PATH: %v", err)
	}
	notExec := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = NewCommand("x", config.Runtime{Binary: notExec}).Initialize(context.Background()); !errors.Is(err, ErrBinaryNotFound) {
		t.Errorf("not executable: %v", err)
	}
	failing := NewCommand("x", config.Runtime{Binary: script(t, "echo broken >&2; exit 1"), VersionArgs: []string{"--version"}})
	if _, err = failing.Initialize(context.Background()); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("failing version check: %v", err)
	}
}

func TestCommandInput(t *testing.T) {
	bin := script(t, "exit 0")
	tmp := t.TempDir()
	in := &Input{Prompt: "do it", TempDir: tmp, Env: []string{"DROVER_TASK_ID=a"}}

	stdin, err := NewCommand("x", config.Runtime{Binary: bin, Input: "stdin", Args: []string{"--yes"}}).Command(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(stdin.Stdin)
	if string(b) != "do it" || !slices.Equal(stdin.Args, []string{"--yes"}) {
		t.Errorf("stdin: args %v, stdin %q", stdin.Args, b)
	}

	arg, err := NewCommand("x", config.Runtime{Binary: bin, Input: "arg", PromptFlag: "-p", Args: []string{"--yes"}}).Command(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(arg.Args, []string{"--yes", "-p", "do it"}) || arg.Stdin != nil {
		t.Errorf("arg: %v", arg.Args)
	}

	file, err := NewCommand("x", config.Runtime{Binary: bin, Input: "file"}).Command(in)
	if err != nil {
		t.Fatal(err)
	}
	p := file.Args[len(file.Args)-1]
	if b, err := os.ReadFile(p); err != nil || string(b) != "do it" || !strings.HasPrefix(p, tmp) {
		t.Errorf("file: %v %q %v", file.Args, b, err)
	}
}

// TestEnvAllowlist: nothing of the worker's environment leaks but the allowlist.
func TestEnvAllowlist(t *testing.T) {
	t.Setenv("SECRET_TOKEN", "hunter2")
	t.Setenv("MY_KEY", "k")
	ad := NewCommand("x", config.Runtime{Binary: script(t, "exit 0"), EnvPassthrough: []string{"MY_KEY"}, Env: []string{"FIXED=1"}})
	tmp := t.TempDir()
	c, err := ad.Command(&Input{Prompt: "p", TempDir: tmp, Env: []string{"DROVER_ATTEMPT_ID=a1"}})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(c.Env, "\n")
	for _, want := range []string{"MY_KEY=k", "FIXED=1", "DROVER_ATTEMPT_ID=a1", "TMPDIR=" + tmp, "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q", want)
		}
	}
	if strings.Contains(env, "hunter2") || strings.Contains(env, "SECRET_TOKEN") {
		t.Errorf("a variable outside the allowlist leaked:\n%s", env)
	}
}

func TestClassifyExit(t *testing.T) {
	for _, tc := range []struct {
		res   supervise.Result
		class drovertype.ErrorClass
	}{
		{supervise.Result{Outcome: supervise.Exited, ExitCode: 0}, ""},
		{supervise.Result{Outcome: supervise.Exited, ExitCode: 3, Stderr: supervise.Captured{Head: []byte("first\nlast words\n")}}, drovertype.ClassRuntimeError},
		{supervise.Result{Outcome: supervise.TimedOut, ExitCode: -1}, drovertype.ClassTimeout},
		{supervise.Result{Outcome: supervise.Hung, ExitCode: -1}, drovertype.ClassTimeout},
		{supervise.Result{Outcome: supervise.Signaled, ExitCode: -1, Signal: "killed"}, drovertype.ClassCrashed},
	} {
		e := ClassifyExit(&tc.res)
		switch {
		case tc.class == "" && e != nil:
			t.Errorf("%+v: %v, want success", tc.res, e)
		case tc.class != "" && (e == nil || e.Class != tc.class):
			t.Errorf("%+v: %v, want %s", tc.res, e, tc.class)
		}
	}
	e := Classify(&supervise.Result{Outcome: supervise.Exited, ExitCode: 3, Stderr: supervise.Captured{Head: []byte("first\nlast words\n")}}, nil)
	if !strings.Contains(e.Message, "last words") {
		t.Errorf("message %q lacks the stderr's last line", e.Message)
	}
}

// TestEnvOverride: each variable is set once, the most specific source
// winning — a duplicate is read as the first value by Go and glibc and as
// the last by sh, so the runtime's HOME or the attempt's TMPDIR could be
// silently ignored.
func TestEnvOverride(t *testing.T) {
	bin, tmp := script(t, "exit 0"), t.TempDir()
	t.Setenv("HOME", "/worker/home")
	t.Setenv("TMPDIR", "/worker/tmp")
	ad := NewCommand("x", config.Runtime{Binary: bin, EnvPassthrough: []string{"TMPDIR"},
		Env: []string{"HOME=/runtime/home", "A=runtime"}})
	c, err := ad.Command(&Input{Prompt: "p", TempDir: tmp, Env: []string{"A=drover"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, kv := range c.Env {
		name, v, _ := strings.Cut(kv, "=")
		if old, dup := seen[name]; dup {
			t.Errorf("%s set twice: %q and %q", name, old, v)
		}
		seen[name] = v
	}
	if seen["HOME"] != "/runtime/home" || seen["A"] != "drover" || seen["TMPDIR"] != filepath.Join(tmp, "tmp") {
		t.Errorf("HOME=%q A=%q TMPDIR=%q; want the runtime's HOME, Drover's A and the attempt's TMPDIR", seen["HOME"], seen["A"], seen["TMPDIR"])
	}
}

// TestIsolatedHome: a fresh HOME per attempt, with the configured login
// files staged from the worker's HOME, missing ones skipped.
func TestIsolatedHome(t *testing.T) {
	workerHome := t.TempDir()
	t.Setenv("HOME", workerHome)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(workerHome, ".claude"), 0o700))
	must(os.WriteFile(filepath.Join(workerHome, ".claude", ".credentials.json"), []byte(`{"token":"t"}`), 0o600))
	must(os.MkdirAll(filepath.Join(workerHome, ".copilot", "pkg"), 0o700))
	must(os.WriteFile(filepath.Join(workerHome, ".copilot", "pkg", "x"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(workerHome, "unrelated"), []byte("private"), 0o600))
	ad := NewCommand("x", config.Runtime{Binary: script(t, "exit 0"), Home: "isolated",
		HomeFiles: []string{".claude/.credentials.json", ".copilot", ".missing/file"}})
	tmp := t.TempDir()
	c, err := ad.Command(&Input{Prompt: "p", TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	if !slices.Contains(c.Env, "HOME="+home) {
		t.Fatalf("HOME not isolated: %v", c.Env)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".claude", ".credentials.json")); err != nil || string(b) != `{"token":"t"}` {
		t.Errorf("credentials not staged: %q %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(home, ".claude", ".credentials.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("credentials mode: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(home, ".copilot", "pkg", "x")); err != nil {
		t.Errorf("directory not staged: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "unrelated")); !os.IsNotExist(err) {
		t.Errorf("an unlisted file was staged: %v", err)
	}
	// The worker's own HOME is what a non-isolated runtime sees.
	plain, err := NewCommand("x", config.Runtime{Binary: script(t, "exit 0")}).Command(&Input{Prompt: "p", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plain.Env, "HOME="+workerHome) {
		t.Errorf("worker HOME not passed: %v", plain.Env)
	}
}

func TestMinVersion(t *testing.T) {
	bin := script(t, `echo "2.1.197 (Claude Code)"`)
	for _, tc := range []struct {
		min string
		ok  bool
	}{{"", true}, {"2.1.0", true}, {"2.1.197", true}, {"2.1.198", false}, {"2.10", false}, {"1", true}, {"3.0", false}} {
		_, err := NewCommand("x", config.Runtime{Binary: bin, VersionArgs: []string{"--version"}, MinVersion: tc.min}).Initialize(context.Background())
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrVersionTooOld)) {
			t.Errorf("min %q: err %v", tc.min, err)
		}
	}
	if compareVersions("1.10", "1.9") <= 0 || compareVersions("2", "2.0") != 0 {
		t.Error("compareVersions")
	}
}

func TestCommandModelAndArgs(t *testing.T) {
	bin := script(t, "exit 0")
	tmp := t.TempDir()
	rt := config.Runtime{Binary: bin, Input: "arg", PromptFlag: "-p", Args: []string{"--yes"}, ModelFlag: "--model", Model: "base-model"}

	cases := []struct {
		name  string
		model string
		args  []string
		want  []string
	}{
		{"configured model", "", nil, []string{"--yes", "--model", "base-model", "-p", "do it"}},
		{"model override", "big-model", nil, []string{"--yes", "--model", "big-model", "-p", "do it"}},
		{"args after configured, before prompt", "", []string{"--effort", "high"}, []string{"--yes", "--model", "base-model", "--effort", "high", "-p", "do it"}},
		{"both", "m2", []string{"-v"}, []string{"--yes", "--model", "m2", "-v", "-p", "do it"}},
	}
	for _, c := range cases {
		cmd, err := NewCommand("x", rt).Command(&Input{Prompt: "do it", TempDir: tmp, Model: c.model, Args: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(cmd.Args, c.want) {
			t.Errorf("%s: args %q, want %q", c.name, cmd.Args, c.want)
		}
	}

	// Stdin input: the extra args are last.
	cmd, err := NewCommand("x", config.Runtime{Binary: bin, Args: []string{"--yes"}}).Command(&Input{Prompt: "p", TempDir: tmp, Args: []string{"--x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cmd.Args, []string{"--yes", "--x"}) {
		t.Errorf("stdin args %q", cmd.Args)
	}

	// No model flag: no model can be selected.
	noFlag := NewCommand("plain", config.Runtime{Binary: bin})
	if _, err := noFlag.Command(&Input{Prompt: "p", TempDir: tmp, Model: "m"}); err == nil || !strings.Contains(err.Error(), "cannot select a model") {
		t.Errorf("model without model_flag: %v", err)
	}
	if cmd, err := noFlag.Command(&Input{Prompt: "p", TempDir: tmp}); err != nil || len(cmd.Args) != 0 {
		t.Errorf("no model: %v %q", err, cmd.Args)
	}
}
