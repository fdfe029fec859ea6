package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/sandbox"
)

// The real CLIs this test installs from npm: the versions docs/runtimes.md
// and testdata/transcripts were recorded with.
const (
	realClaudeVersion = "2.1.197"
	realCodexVersion  = "0.169.0"
	realCLIInstallMax = 6 * time.Minute
)

// TestRealCLIs runs the built-in claude-code and codex runtimes with the real
// claude and codex binaries (installed from npm into a cache kept between
// runs) against a loopback mock of their model APIs (mockmodel_test.go). Only
// what must differ from the built-ins is set, by environment: the binary
// paths, the model endpoints and keys. codex's key variable, which its
// config.toml names (env_key), is passed through by the built-in's
// provider_config, with no passthrough list configured.
//
// First flow: each CLI gets a tool call that writes hello.txt, then a final
// text; the file must be in the task's result branch. Second flow: the mock
// answers 429 to every model request; each attempt must fail classified
// RATE_LIMITED with status 429 (claude retries once: the built-in runtime
// sets CLAUDE_CODE_MAX_RETRIES=1; codex retries 5 times, about 1 s apart).
//
// Needs npm and network access to the npm registry on the first run (about
// 640 MB); skipped otherwise. The cache is $DROVER_E2E_CLI_CACHE/<versions>,
// or <user cache dir>/drover-e2e-clis/<versions>.
func TestRealCLIs(t *testing.T) {
	if testing.Short() {
		t.Skip("real CLIs: skipped in -short mode")
	}
	t.Parallel()
	clis := installRealCLIs(t)
	began := time.Now()

	mock := newMockModel(t)
	codexHome := t.TempDir()
	// docs/runtimes.md#codex: a custom provider speaking the Responses API
	// (the built-in one would try a WebSocket first), analytics off (else
	// exit waits ~5 s on an upload that cannot resolve).
	config := fmt.Sprintf(`model = "mock-model"
model_provider = "mock"

[analytics]
enabled = false

[model_providers.mock]
name = "mock"
base_url = "%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, mock.URL())
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	runtimes := []string{
		"DROVER_RUNTIMES_CLAUDE_CODE_BINARY=" + clis.claude,
		"DROVER_RUNTIMES_CODEX_BINARY=" + clis.codex,
		// Confined, codex may connect to its model's port: its provider's
		// base_url is in config.toml, whose port Drover does not read
		// (claude's is ANTHROPIC_BASE_URL, whose port is allowed by itself).
		"DROVER_RUNTIMES_CODEX_SANDBOX_CONNECT=" + mock.URL(),
	}
	c := startController(t, runtimes...)
	c.startWorker("worker-1", 2, append(runtimes,
		"DROVER_WORKER_RUNTIMES=claude-code,codex",
		"HOME="+t.TempDir(), // the worker's HOME, a fresh one; each CLI gets a HOME of its own, confined
		// Passed through by the built-in claude-code runtime.
		"ANTHROPIC_BASE_URL="+mock.URL(),
		"ANTHROPIC_API_KEY=sk-ant-mock-key",
		"IS_SANDBOX=1", // tests run as root; claude refuses to skip permissions as root otherwise
		// Passed through by codex: CODEX_HOME by its list, MOCK_API_KEY
		// because $CODEX_HOME/config.toml names it.
		"CODEX_HOME="+codexHome,
		"MOCK_API_KEY=sk-mock",
	)...)
	repo := newRepo(t)

	flow := func(name, suffix string) string {
		return writeFlow(t, "name: "+name+"\nrepo: "+repo+"\nbase: main\ntimeout: 3m\nretry: {max_attempts: 1}\ntasks:\n"+
			"  - id: claude"+suffix+"\n    runtime: claude-code\n    prompt: create hello.txt containing hi\n"+
			"  - id: codex"+suffix+"\n    runtime: codex\n    prompt: create hello.txt containing hi\n")
	}
	run := func(flowFile string, wantCode int) (*flowResult, time.Duration) {
		t.Helper()
		t0 := time.Now()
		out, errOut, code := c.cli("submit", flowFile, "--watch")
		took := time.Since(t0)
		if code != wantCode {
			t.Fatalf("submit --watch: exit %d, want %d\n%s\n%s\nmock requests:\n%s", code, wantCode, out, errOut,
				strings.Join(mock.requests(), "\n"))
		}
		st := c.status(submittedID(t, out))
		r := &flowResult{tasks: map[string]*projection.Task{}, attempts: map[string]*projection.Attempt{}}
		for _, task := range st.Detail.Tasks {
			r.tasks[task.ID] = task
		}
		for _, a := range st.Detail.Attempts {
			r.attempts[a.Task] = a
		}
		return r, took
	}

	// 1. Success: a tool call writes hello.txt, then a final text.
	ok, took := run(flow("real-clis", ""), 0)
	t.Logf("success flow: %s", took.Round(time.Millisecond))
	for _, id := range []string{"claude", "codex"} {
		task, a := ok.tasks[id], ok.attempts[id]
		if task == nil || a == nil || a.Report == nil {
			t.Fatalf("%s: no task or attempt report: %+v %+v", id, task, a)
		}
		t.Logf("  %s: %s in %d ms, usage %+v, final text %q, sandbox %q", id, task.State, a.Report.DurationMS, a.Report.Usage, a.Report.FinalText, a.Report.Sandbox)
		if sandbox.Probe().Usable() == nil && !strings.HasPrefix(a.Report.Sandbox, "landlock ABI") {
			t.Errorf("%s ran unconfined on a kernel that confines: sandbox %q", id, a.Report.Sandbox)
		}
		if task.State != drovertype.TaskSucceeded {
			rep := c.report(a.ID)
			t.Errorf("%s: state %s (error %+v)\nstdout:\n%s\nstderr:\n%s", id, task.State, task.Error,
				rep.StdoutTail, rep.StderrTail)
			continue
		}
		if got := show(t, repo, task.ResultBranch, "hello.txt"); got != "hi" {
			t.Errorf("%s: hello.txt in %s = %q, want hi", id, task.ResultBranch, got)
		}
		if a.Report.FinalText != "Done. Created hello.txt." {
			t.Errorf("%s: final text %q", id, a.Report.FinalText)
		}
		if u := a.Report.Usage; u == nil || u.InputTokens == nil || *u.InputTokens == 0 || u.OutputTokens == nil || *u.OutputTokens == 0 {
			t.Errorf("%s: usage %+v, want tokens from the CLI's own report", id, u)
		}
	}

	// 2. Every model request is rate limited.
	mock.rateLimit.Store(true)
	limited, took := run(flow("real-clis-429", "-429"), 1)
	t.Logf("429 flow: %s", took.Round(time.Millisecond))
	for _, id := range []string{"claude-429", "codex-429"} {
		task, a := limited.tasks[id], limited.attempts[id]
		if task == nil || a == nil || a.Report == nil {
			t.Fatalf("%s: no task or attempt report: %+v %+v", id, task, a)
		}
		t.Logf("  %s: %s in %d ms, error %+v", id, task.State, a.Report.DurationMS, a.Report.Error)
		if task.State != drovertype.TaskFailed {
			t.Errorf("%s: state %s, want failed", id, task.State)
		}
		if e := a.Report.Error; e == nil || e.Class != "RATE_LIMITED" || e.Status != 429 {
			rep := c.report(a.ID)
			t.Errorf("%s: error %+v, want RATE_LIMITED with status 429\nstdout:\n%s\nstderr:\n%s", id, e,
				rep.StdoutTail, rep.StderrTail)
		}
		if a.Report.Branch != "" || git(t, repo, "for-each-ref", "refs/heads/"+a.Branch) != "" {
			t.Errorf("%s: the rate-limited attempt pushed %s", id, a.Branch)
		}
	}
	t.Logf("mock requests:\n  %s", strings.Join(mock.requests(), "\n  "))
	t.Logf("real CLIs through Drover: %s after install", time.Since(began).Round(time.Millisecond))
}

type flowResult struct {
	tasks    map[string]*projection.Task
	attempts map[string]*projection.Attempt // the last attempt of each task
}

// realCLIs are the installed binaries.
type realCLIs struct{ claude, codex string }

// installRealCLIs returns the real claude and codex from the cache, installing
// them with npm first if they are not there or do not run. It skips the test
// when npm is missing or the install fails (no network).
func installRealCLIs(t *testing.T) realCLIs {
	t.Helper()
	key := "claude-code-" + realClaudeVersion + "_codex-" + realCodexVersion
	root := os.Getenv("DROVER_E2E_CLI_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("real CLIs: no cache dir to install them into (%v); set DROVER_E2E_CLI_CACHE", err)
		}
		root = filepath.Join(cache, "drover-e2e-clis")
	}
	dir := filepath.Join(root, key)
	if clis, err := realCLIsIn(t, dir); err == nil {
		t.Logf("real CLIs: using %s", dir)
		return clis
	}

	howTo := fmt.Sprintf("to run it: `go test -run TestRealCLIs ./e2e/` on a machine with npm and access to the "+
		"npm registry (needed once; the CLIs are kept in %s, $DROVER_E2E_CLI_CACHE sets the parent dir)", dir)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("real CLIs: npm not found (%v); %s", err, howTo)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Skipf("real CLIs: %v; %s", err, howTo)
	}
	// Install into a fresh dir and rename it into place, so an interrupted
	// install leaves nothing half-made and concurrent runs do not collide.
	tmp, err := os.MkdirTemp(root, key+".partial-")
	if err != nil {
		t.Skipf("real CLIs: %v; %s", err, howTo)
	}
	defer os.RemoveAll(tmp)
	pkgs := []string{"@anthropic-ai/claude-code@" + realClaudeVersion, "@openai/codex@" + realCodexVersion}
	t.Logf("real CLIs: npm install %s into %s (~640 MB, up to %s)…", strings.Join(pkgs, " "), dir, realCLIInstallMax)
	ctx, cancel := context.WithTimeout(context.Background(), realCLIInstallMax)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--loglevel=error"}, pkgs...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill npm's children (postinstall) too
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("real CLIs: `npm install %s` failed after %s (no network to the registry?): %v\n%s\n%s",
			strings.Join(pkgs, " "), time.Since(t0).Round(time.Second), err, tail(string(out), 1500), howTo)
	}
	t.Logf("real CLIs: installed in %s", time.Since(t0).Round(100*time.Millisecond))

	_ = os.RemoveAll(dir) // a broken earlier install
	if err := os.Rename(tmp, dir); err != nil {
		// Another run may have put its install in place meanwhile.
		if clis, err2 := realCLIsIn(t, dir); err2 == nil {
			return clis
		}
		t.Fatalf("real CLIs: %v", err)
	}
	clis, err := realCLIsIn(t, dir)
	if err != nil {
		t.Fatalf("real CLIs: installed into %s but: %v", dir, err)
	}
	return clis
}

// realCLIsIn returns the binaries under an npm prefix if `--version` of each
// runs and names the expected version.
func realCLIsIn(t *testing.T, prefix string) (realCLIs, error) {
	clis := realCLIs{claude: filepath.Join(prefix, "node_modules", ".bin", "claude"),
		codex: filepath.Join(prefix, "node_modules", ".bin", "codex")}
	home := t.TempDir()
	for _, b := range []struct{ path, version string }{{clis.claude, realClaudeVersion}, {clis.codex, realCodexVersion}} {
		if _, err := os.Stat(b.path); err != nil {
			return clis, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, b.path, "--version")
		cmd.Env = append(cleanEnv(), "HOME="+home, "CODEX_HOME="+home)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), b.version) {
			return clis, fmt.Errorf("%s --version: %v: %s", b.path, err, out)
		}
	}
	return clis, nil
}
