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
// paths, the model endpoints and keys. codex's key variable and endpoint,
// which its ~/.codex/config.toml names (env_key, base_url), are passed
// through and opened to the sandbox by the built-in's provider_config, with
// no passthrough list nor connect port configured.
//
// First flow: each CLI gets a tool call that writes hello.txt, then a final
// text; the file must be in the task's result branch. Second flow: the mock
// answers 429 to every model request; each attempt must fail classified
// RATE_LIMITED with status 429 (claude retries once: the built-in runtime
// sets CLAUDE_CODE_MAX_RETRIES=1; codex retries 5 times, about 1 s apart),
// and use none of the task's one attempt: the task fails RATE_LIMITED once
// its retry.rate_limit_wait is spent, whether its retry met the limit again
// or a cooldown still held it back.
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
	// The worker's HOME, a fresh one; each CLI gets a HOME of its own,
	// confined, into which the built-ins stage their configuration.
	home := t.TempDir()
	// docs/runtimes.md#codex: a custom provider speaking the Responses API
	// (the built-in one would try a WebSocket first), analytics off (else
	// exit waits ~5 s on an upload that cannot resolve).
	writeConfig(t, filepath.Join(home, ".codex", "config.toml"), codexConfig(mock.URL()))

	// Nothing configured but the binaries: confined, each CLI reaches its
	// model's port because Drover opens it, claude's from
	// ANTHROPIC_BASE_URL, codex's from the base_url in its own config.toml.
	runtimes := []string{
		"DROVER_RUNTIMES_CLAUDE_CODE_BINARY=" + clis.claude,
		"DROVER_RUNTIMES_CODEX_BINARY=" + clis.codex,
	}
	c := startController(t, runtimes...)
	c.startWorker("worker-1", 2, append(runtimes,
		"DROVER_WORKER_RUNTIMES=claude-code,codex",
		"HOME="+home,
		// Passed through by the built-in claude-code runtime.
		"ANTHROPIC_BASE_URL="+mock.URL(),
		"ANTHROPIC_API_KEY=sk-ant-mock-key",
		"IS_SANDBOX=1", // tests run as root; claude refuses to skip permissions as root otherwise
		// Passed through by codex because ~/.codex/config.toml names it.
		"MOCK_API_KEY=sk-mock",
	)...)
	repo := newRepo(t)

	flow := func(name, suffix, retry string) string {
		return writeFlow(t, "name: "+name+"\nrepo: "+repo+"\nbase: main\ntimeout: 3m\nretry: {max_attempts: 1"+retry+"}\ntasks:\n"+
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
		r := &flowResult{tasks: map[string]*projection.Task{}, attempts: map[string]*projection.Attempt{},
			all: map[string][]*projection.Attempt{}}
		for _, task := range st.Detail.Tasks {
			r.tasks[task.ID] = task
		}
		for _, a := range st.Detail.Attempts {
			r.attempts[a.Task] = a
			r.all[a.Task] = append(r.all[a.Task], a)
		}
		return r, took
	}

	// 1. Success: a tool call writes hello.txt, then a final text.
	ok, took := run(flow("real-clis", "", ""), 0)
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

	// 2. Every model request is rate limited. A limit uses none of the
	// task's one attempt; it is waited out for 2s, retries a second apart
	// (the CLIs' cooldown may hold them back longer: then none comes).
	mock.rateLimit.Store(true)
	const limitWait = "2s"
	limited, took := run(flow("real-clis-429", "-429", ", max_backoff: 1s, rate_limit_wait: "+limitWait), 1)
	t.Logf("429 flow: %s", took.Round(time.Millisecond))
	for _, id := range []string{"claude-429", "codex-429"} {
		task := limited.tasks[id]
		if task == nil || len(limited.all[id]) == 0 {
			t.Fatalf("%s: no task or attempt: %+v", id, task)
		}
		if n := checkLimited(t, c, repo, task, limited.all[id], limitWait); n == 0 {
			t.Errorf("%s: no attempt met the limit", id)
		}
	}
	t.Logf("mock requests:\n  %s", strings.Join(mock.requests(), "\n  "))
	t.Logf("real CLIs through Drover: %s after install", time.Since(began).Round(time.Millisecond))
}

type flowResult struct {
	tasks    map[string]*projection.Task
	attempts map[string]*projection.Attempt   // the last attempt of each task
	all      map[string][]*projection.Attempt // every attempt of each task
}

// realCLIs are the installed binaries.
type realCLIs struct{ claude, codex string }

// npmCLI is a CLI installed from npm for the real-CLI tests: the name its
// cache key uses, its package and version, its binary.
type npmCLI struct{ name, pkg, version, bin string }

var (
	npmClaude   = npmCLI{"claude-code", "@anthropic-ai/claude-code", realClaudeVersion, "claude"}
	npmCodex    = npmCLI{"codex", "@openai/codex", realCodexVersion, "codex"}
	npmOpencode = npmCLI{"opencode", "opencode-ai", "1.18.33", "opencode"}
	npmKilo     = npmCLI{"kilo", "@kilocode/cli", "7.7.7", "kilo"}
	npmPi       = npmCLI{"pi", "@mariozechner/pi-coding-agent", "0.73.1", "pi"}
)

// installRealCLIs returns the real claude and codex from the cache, installing
// them with npm first if they are not there or do not run. It skips the test
// when npm is missing or the install fails (no network).
func installRealCLIs(t *testing.T) realCLIs {
	bins := installNPM(t, "TestRealCLIs", npmClaude, npmCodex)
	return realCLIs{claude: bins["claude-code"], codex: bins["codex"]}
}

// installNPM returns the binaries of clis, by name, from the cache,
// installing them with npm first (into one prefix) if they are not there
// or do not run. It skips test when npm is missing or the install fails
// (no network). The cache is $DROVER_E2E_CLI_CACHE/<names and versions>,
// or <user cache dir>/drover-e2e-clis/<names and versions>.
func installNPM(t *testing.T, test string, clis ...npmCLI) map[string]string {
	t.Helper()
	var parts, pkgs []string
	for _, c := range clis {
		parts = append(parts, c.name+"-"+c.version)
		pkgs = append(pkgs, c.pkg+"@"+c.version)
	}
	key := strings.Join(parts, "_")
	root := os.Getenv("DROVER_E2E_CLI_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("real CLIs: no cache dir to install them into (%v); set DROVER_E2E_CLI_CACHE", err)
		}
		root = filepath.Join(cache, "drover-e2e-clis")
	}
	dir := filepath.Join(root, key)
	if bins, err := npmBinsIn(t, dir, clis); err == nil {
		t.Logf("real CLIs: using %s", dir)
		return bins
	}

	howTo := fmt.Sprintf("to run it: `go test -run %s ./e2e/` on a machine with npm and access to the "+
		"npm registry (needed once; the CLIs are kept in %s, $DROVER_E2E_CLI_CACHE sets the parent dir)", test, dir)
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
	t.Logf("real CLIs: npm install %s into %s (up to %s)…", strings.Join(pkgs, " "), dir, realCLIInstallMax)
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
		if bins, err2 := npmBinsIn(t, dir, clis); err2 == nil {
			return bins
		}
		t.Fatalf("real CLIs: %v", err)
	}
	bins, err := npmBinsIn(t, dir, clis)
	if err != nil {
		t.Fatalf("real CLIs: installed into %s but: %v", dir, err)
	}
	return bins
}

// npmBinsIn returns the binaries under an npm prefix, by name, if
// `--version` of each runs and names the expected version.
func npmBinsIn(t *testing.T, prefix string, clis []npmCLI) (map[string]string, error) {
	bins := map[string]string{}
	home := t.TempDir()
	for _, c := range clis {
		path := filepath.Join(prefix, "node_modules", ".bin", c.bin)
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, path, "--version")
		cmd.Env = append(cleanEnv(), "HOME="+home, "CODEX_HOME="+home)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), c.version) {
			return nil, fmt.Errorf("%s --version: %v: %s", path, err, out)
		}
		bins[c.name] = path
	}
	return bins, nil
}
