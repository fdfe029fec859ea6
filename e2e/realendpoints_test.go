package e2e

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/sandbox"
)

// TestRealCLIEndpoints runs the real codex, opencode, kilo and pi (the
// versions docs/runtimes.md was recorded with, installed from npm into a
// cache kept between runs, as TestRealCLIs does) on the built-in runtimes,
// each configured for a loopback model server only in its own
// configuration file in the worker's HOME — codex ~/.codex/config.toml, pi
// ~/.pi/agent/models.json, opencode and kilo ~/.config/<cli>/opencode.json
// — with nothing configured in Drover but the binaries. Before issue 27
// none reached its server confined: codex reconnected until its timeout,
// the others ended RUNTIME_ERROR after 24–76 s. Each must now reach it and
// succeed.
//
// Then codex with the same config.toml under $CODEX_HOME, which the
// built-in lets codex write: its port is not opened (nor is its key
// variable passed: the test lists it in env_passthrough_add), and codex,
// which reconnects for ever, must be stopped SANDBOX_DENIED, naming the
// port.
//
// Needs npm and the npm registry on its first run (about 1.3 GB); skipped
// otherwise.
func TestRealCLIEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("real CLIs: skipped in -short mode")
	}
	t.Parallel()
	bins := installNPM(t, "TestRealCLIEndpoints", npmCodex, npmOpencode, npmKilo, npmPi)
	began := time.Now()
	mock := newMockModel(t)

	home := t.TempDir()
	writeConfig(t, filepath.Join(home, ".codex", "config.toml"), codexConfig(mock.URL()))
	writeConfig(t, filepath.Join(home, ".pi", "agent", "models.json"), piModels(mock.URL()))
	openCode := `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Mock","options":{"baseURL":"` + mock.URL() +
		`/v1","apiKey":"{env:MOCK_API_KEY}"},"models":{"mock-model":{"name":"Mock Model","tool_call":true}}}}}`
	writeConfig(t, filepath.Join(home, ".config", "opencode", "opencode.json"), openCode)
	writeConfig(t, filepath.Join(home, ".config", "kilo", "opencode.json"), openCode)

	env := []string{"DROVER_WORKER_RUNTIMES=codex,opencode,kilo,pi", "HOME=" + home, "MOCK_API_KEY=sk-mock"}
	for runtime, bin := range bins {
		env = append(env, "DROVER_RUNTIMES_"+strings.ToUpper(runtime)+"_BINARY="+bin)
	}
	c := startController(t, env...)
	w := c.startWorker("worker-1", 4, env...)
	repo := newRepo(t)

	ok := runFlow(t, c, "name: real-endpoints\nrepo: "+repo+"\nbase: main\ntimeout: 4m\nretry: {max_attempts: 1}\ntasks:\n"+
		"  - {id: codex, runtime: codex, prompt: create hello.txt containing hi}\n"+
		"  - {id: opencode, runtime: {name: opencode, model: mock/mock-model}, prompt: say done}\n"+
		"  - {id: kilo, runtime: {name: kilo, model: mock/mock-model}, prompt: say done}\n"+
		"  - {id: pi, runtime: {name: pi, model: mock-model, args: [--provider, mock]}, prompt: say done}\n", 0)
	t.Logf("real CLIs reached their models in %s", time.Since(began).Round(time.Millisecond))
	for id, task := range ok.tasks {
		r := ok.attempts[id].Report
		t.Logf("  %s: %s in %d ms, sandbox %q, denied %q", id, task.State, r.DurationMS, r.Sandbox, r.SandboxDenied)
		if task.State != drovertype.TaskSucceeded {
			t.Errorf("%s: %s %+v", id, task.State, task.Error)
		}
	}
	if got := show(t, repo, ok.tasks["codex"].ResultBranch, "hello.txt"); got != "hi" {
		t.Errorf("codex: hello.txt = %q", got)
	}
	if n := len(slices.DeleteFunc(mock.requests(), func(r string) bool { return !strings.HasPrefix(r, "POST /v1/chat/completions") })); n < 3 {
		t.Errorf("the model server got %d Chat Completions requests, want some from each of opencode, kilo and pi:\n%s", n,
			strings.Join(mock.requests(), "\n"))
	}
	w.stop()

	if err := sandbox.Probe().Usable(); err != nil {
		t.Logf("this kernel cannot confine (%v): the refused endpoint is not tried", err)
		return
	}
	shared := t.TempDir()
	writeConfig(t, filepath.Join(shared, "config.toml"), codexConfig(mock.URL()))
	// Nor is the key variable it names passed: without the passthrough
	// codex would fail AUTH_FAILED (Missing environment variable) at once.
	c.startWorker("worker-2", 1, append(env, "CODEX_HOME="+shared, "DROVER_RUNTIMES_CODEX_ENV_PASSTHROUGH_ADD=MOCK_API_KEY")...)
	before := len(mock.requests())
	t0 := time.Now()
	denied := runFlow(t, c, "name: real-denied\nrepo: "+repo+"\nbase: main\ntimeout: 4m\nretry: {max_attempts: 1}\ntasks:\n"+
		"  - {id: codex, runtime: codex, prompt: create hello.txt containing hi}\n", 1)
	a := denied.attempts["codex"]
	e := a.Report.Error
	t.Logf("codex, its endpoint refused: %s after %s (%d ms running): %s", e.Class, time.Since(t0).Round(time.Millisecond), a.Report.DurationMS, e.Message)
	u, _ := url.Parse(mock.URL())
	if e.Class != drovertype.ClassSandboxDenied || !strings.Contains(e.Message, fmt.Sprintf("connect to 127.0.0.1:%s refused by the sandbox", u.Port())) ||
		!strings.Contains(e.Message, "then Drover stopped the CLI") {
		rep := c.report(a.ID)
		t.Errorf("codex: error %+v, want SANDBOX_DENIED, stopped\nstdout:\n%s\nstderr:\n%s", e, rep.StdoutTail, rep.StderrTail)
	}
	if got := mock.requests()[before:]; len(got) != 0 {
		t.Errorf("codex reached a port the sandbox refuses: %q", got)
	}
	if !slices.ContainsFunc(a.Report.SandboxDenied, func(d string) bool { return strings.HasPrefix(d, "tcp/"+u.Port()+": ") }) {
		t.Errorf("denied %q", a.Report.SandboxDenied)
	}
}
