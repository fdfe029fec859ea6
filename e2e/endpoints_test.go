package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/sandbox"
)

// requestLog is a loopback model server that records each request and
// answers anything: reaching it is what counts.
type requestLog struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRequestLog(t *testing.T) *requestLog {
	l := &requestLog{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		w.WriteHeader(http.StatusNotImplemented)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// codexConfig and piModels are the configurations docs/runtimes.md records
// the real CLIs working with against a loopback model server.
func codexConfig(base string) string {
	return "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[analytics]\nenabled = false\n\n[model_providers.mock]\nname = \"mock\"\n" +
		"base_url = \"" + base + "/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n"
}

func piModels(base string) string {
	return `{"providers":{"mock":{"baseUrl":"` + base + `/v1","api":"openai-completions","apiKey":"MOCK_API_KEY","models":[{"id":"mock-model"}]}}}`
}

// runFlow submits a flow, waits for it, and returns its tasks and last
// attempts by task.
func runFlow(t *testing.T, c *cluster, body string, wantCode int) *flowResult {
	t.Helper()
	out, errOut, code := c.cli("submit", writeFlow(t, body), "--watch")
	if code != wantCode {
		t.Fatalf("submit --watch: exit %d, want %d\n%s\n%s", code, wantCode, out, errOut)
	}
	st := c.status(submittedID(t, out))
	r := &flowResult{tasks: map[string]*projection.Task{}, attempts: map[string]*projection.Attempt{}}
	for _, task := range st.Detail.Tasks {
		r.tasks[task.ID] = task
	}
	for _, a := range st.Detail.Attempts {
		if prev := r.attempts[a.Task]; prev == nil || a.N > prev.N {
			r.attempts[a.Task] = a
		}
	}
	return r
}

// TestSandboxOpensConfiguredEndpoints runs fake codex and pi CLIs (the
// demo agent's personas, @call-model) under the real sandbox, on the
// built-in runtimes with nothing configured but their binaries: each
// reaches the loopback model server its own configuration file names
// (codex's ~/.codex/config.toml, pi's ~/.pi/agent/models.json, staged
// into each attempt's HOME), which before issue 27 the sandbox refused.
//
// Then the same codex configuration under $CODEX_HOME, which the built-in
// codex runtime lets its CLI write (so an earlier attempt could have
// written it): it opens no port, and codex, retrying its model for ever
// as the real one does, is stopped SANDBOX_DENIED, the report and the
// task's error naming the port and what opens it; the task moves to its
// fallback runtime, pi, which gets through.
func TestSandboxOpensConfiguredEndpoints(t *testing.T) {
	t.Parallel()
	if err := sandbox.Probe().Usable(); err != nil {
		t.Skipf("this kernel cannot confine: %v", err)
	}
	model := newRequestLog(t)
	u, err := url.Parse(model.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	writeConfig(t, filepath.Join(home, ".codex", "config.toml"), codexConfig(model.srv.URL))
	writeConfig(t, filepath.Join(home, ".pi", "agent", "models.json"), piModels(model.srv.URL))
	env := append(personaEnv(t, map[string]string{"codex": "codex", "pi": "pi"}),
		"DROVER_WORKER_RUNTIMES=codex,pi", "HOME="+home, "MOCK_API_KEY=sk-mock")
	c := startController(t, env...)
	repo := newRepo(t)

	// 1. Each reaches its model, and goes on to succeed.
	w1 := c.startWorker("worker-1", 2, env...)
	ok := runFlow(t, c, "name: endpoints\nrepo: "+repo+"\nbase: main\ntimeout: 1m\nretry: {max_attempts: 1}\ntasks:\n"+
		"  - {id: codex, runtime: codex, prompt: '@call-model'}\n"+
		"  - {id: pi, runtime: {name: pi, args: [--provider, mock, --model, mock-model]}, prompt: '@call-model'}\n", 0)
	for _, id := range []string{"codex", "pi"} {
		if task := ok.tasks[id]; task.State != drovertype.TaskSucceeded {
			t.Errorf("%s: %s %+v", id, task.State, task.Error)
		}
		if r := ok.attempts[id].Report; !strings.HasPrefix(r.Sandbox, "landlock ABI") || len(r.SandboxDenied) != 0 {
			t.Errorf("%s: sandbox %q, denied %q", id, r.Sandbox, r.SandboxDenied)
		}
	}
	got := model.requests()
	slices.Sort(got)
	if want := []string{"POST /v1/chat/completions", "POST /v1/responses"}; !slices.Equal(got, want) {
		t.Fatalf("the model server saw %q, want %q", got, want)
	}
	w1.stop()

	// 2. Named only by a file attempts can write: refused, stopped, named,
	// and the fallback runs.
	shared := t.TempDir()
	writeConfig(t, filepath.Join(shared, "config.toml"), codexConfig(model.srv.URL))
	c.startWorker("worker-2", 2, append(env, "CODEX_HOME="+shared)...)
	began := time.Now()
	denied := runFlow(t, c, "name: denied\nrepo: "+repo+"\nbase: main\ntimeout: 3m\n"+
		"retry: {max_attempts: 2, fallback: [pi]}\ntasks:\n  - {id: codex, runtime: codex, prompt: '@call-model'}\n", 0)
	t.Logf("denied flow: %s", time.Since(began).Round(time.Millisecond))
	task := denied.tasks["codex"]
	if task.State != drovertype.TaskSucceeded || denied.attempts["codex"].Runtime != "pi" {
		t.Fatalf("task %s on %s (%+v), want succeeded by the fallback pi", task.State, denied.attempts["codex"].Runtime, task.Error)
	}
	firstID := drovertype.AttemptID(task.Flow, "codex", 1)
	first := c.report(firstID)
	e := first.Error
	t.Logf("codex: %s in %d ms: %s", e.Class, first.DurationMS, e.Message)
	wantMsg := fmt.Sprintf("connect to 127.0.0.1:%s refused by the sandbox: add the port to runtimes.codex.sandbox.connect; named by "+
		"model_providers.mock.base_url in %s, which attempts can write", u.Port(), filepath.Join(shared, "config.toml"))
	if e.Class != drovertype.ClassSandboxDenied || !strings.Contains(e.Message, wantMsg) || !strings.Contains(e.Message, "then Drover stopped the CLI") {
		t.Errorf("codex: error %+v, want SANDBOX_DENIED: %s", e, wantMsg)
	}
	if len(first.SandboxDenied) != 1 || !strings.HasPrefix(first.SandboxDenied[0], "tcp/"+u.Port()+": ") {
		t.Errorf("codex: denied %q", first.SandboxDenied)
	}
	exited := ofType(c.events(task.Flow), event.RuntimeExited, "codex")
	var data event.RuntimeExitedData
	if len(exited) == 0 || json.Unmarshal(exited[0].Data, &data) != nil || data.Outcome != "stopped" || len(data.Denied) != 1 {
		t.Errorf("codex's runtime_exited: %+v", data)
	}
	// What the operator sees.
	out, _, _ := c.cli("report", firstID)
	if !strings.Contains(out, "SANDBOX_DENIED") || !strings.Contains(out, "denied by the sandbox: tcp/"+u.Port()) {
		t.Errorf("controller report:\n%s", out)
	}
	if got := model.requests(); len(got) != 3 || got[2] != "POST /v1/chat/completions" {
		t.Errorf("the model server saw %q: codex must not have reached it, pi must have", got)
	}
}

// writeConfig writes a file, making its directory.
func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, path, content)
}
