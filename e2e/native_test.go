package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// nativeRig is a set of native runtimes, each against a test server of its
// own on loopback speaking one provider's wire protocol, written into a
// config file that the controller, the workers and the CLI all read.
type nativeRig struct {
	t       *testing.T
	servers map[string]*nativetest.Server
	yaml    strings.Builder
	env     []string // the processes' environment: the config file, the keys
}

// nativeKey is the key every rig server accepts unless told otherwise. Its
// variable's name is one the secret-name pattern misses: it is masked
// because a native runtime names it in api_key_env.
const (
	nativeKey    = "e2e-native-key-0123456789"
	nativeKeyEnv = "E2E_LLM_PASS"
)

func newNativeRig(t *testing.T) *nativeRig {
	r := &nativeRig{t: t, servers: map[string]*nativetest.Server{}}
	r.yaml.WriteString("runtimes:\n")
	r.env = []string{nativeKeyEnv + "=" + nativeKey}
	return r
}

// add configures runtime name on a new server of provider that accepts
// key, answering as respond does; extra is more YAML for the runtime. The
// runtime's key is nativeKey, in nativeKeyEnv.
func (r *nativeRig) add(name, provider, key string, respond func(*nativetest.Turn) nativetest.Reply, extra string) *nativetest.Server {
	return r.addKeyed(name, provider, key, nativeKeyEnv, respond, extra)
}

// addKeyed is add with the runtime's key in keyEnv, which the rig's
// environment must set.
func (r *nativeRig) addKeyed(name, provider, key, keyEnv string, respond func(*nativetest.Turn) nativetest.Reply, extra string) *nativetest.Server {
	var srv *nativetest.Server
	switch provider {
	case "anthropic":
		srv = nativetest.NewAnthropic(r.t, key)
	case "openai-responses":
		srv = nativetest.NewResponses(r.t, key)
	case "openai-chat":
		srv = nativetest.NewChat(r.t, key)
	}
	srv.RespondWith(respond)
	r.servers[name] = srv
	fmt.Fprintf(&r.yaml, "  %s:\n    adapter: native\n    provider: %s\n    base_url: %s\n    api_key_env: %s\n    model: %s\n    price: {input: 3, output: 15}\n",
		name, provider, srv.BaseURL(), keyEnv, srv.ModelID)
	for line := range strings.Lines(extra) {
		r.yaml.WriteString("    " + line)
	}
	return srv
}

// start writes the config and starts a controller and a worker serving
// every runtime of the rig.
func (r *nativeRig) start(slots int) (*cluster, *proc) {
	p := filepath.Join(r.t.TempDir(), "drover.yaml")
	if err := os.WriteFile(p, []byte(r.yaml.String()), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.env = append(r.env, "DROVER_CONFIG="+p)
	c := startController(r.t, r.env...)
	c.cliEnv = append(c.cliEnv, r.env...)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range r.servers {
			if !yield(n) {
				return
			}
		}
	})
	w := c.startWorker("worker-1", slots, append(r.env, "DROVER_WORKER_RUNTIMES="+strings.Join(names, ","))...)
	w.waitLog(30*time.Second, "worker running")
	return c, w
}

// leakKey answers as Directed does, and a last answer that quotes the API
// key, as a model repeating what it saw might: it must reach no report,
// log or event unmasked.
func leakKey(t *nativetest.Turn) nativetest.Reply {
	r := nativetest.Directed(t)
	if r.Status == 0 && len(r.ToolCalls) == 0 {
		r.Text += " (key " + nativeKey + ")"
	}
	return r
}

// TestNativeFlow runs a flow on native runtimes against a test server for
// each wire protocol: the tasks edit files through the tools, their result
// branches hold the changes, a write outside a task's scope is refused to
// the model and never happens (the report lists it), every attempt says
// what its runtime can do before it starts, the logs show the agent's
// turns, the fleet views show each runtime's provider and model, the key
// is masked, and a stored log replays through the mock model.
func TestNativeFlow(t *testing.T) {
	t.Parallel()
	rig := newNativeRig(t)
	rig.add("nat-anthropic", "anthropic", nativeKey, leakKey, "budget: {turns: 10, tokens: 100000}\n")
	rig.add("nat-responses", "openai-responses", nativeKey, nativetest.Directed, "")
	rig.add("nat-chat", "openai-chat", nativeKey, nativetest.Directed, "")
	c, w := rig.start(3)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: native
repo: `+repo+`
base: main
tasks:
  - id: a
    runtime: nat-anthropic
    prompt: |
      Add a file and build.
      @write src/a.txt written through the Messages API
      @bash echo "built by $DROVER_TASK_ID" > src/built.txt
      @say Added src/a.txt.
  - id: b
    runtime: {name: nat-responses, model: test-model-b}
    prompt: |
      Read, then write.
      @read README.md
      @write src/b.txt written through the Responses API
  - id: c
    runtime: nat-chat
    scope: {allow: ["src/**"]}
    prompt: |
      Stay in src.
      @write README.md overwritten outside the scope
      @write ../escaped.txt outside the worktree
      @write src/c.txt written through Chat Completions
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	st := c.status(id)
	if st.Detail.Flow.State != drovertype.FlowSucceeded {
		t.Fatalf("flow %s", st.Detail.Flow.State)
	}
	branches := map[string]string{}
	for _, task := range st.Detail.Tasks {
		branches[task.ID] = task.ResultBranch
	}
	for task, want := range map[string][]string{"a": {"src/a.txt", "src/built.txt"}, "b": {"src/b.txt"}, "c": {"src/c.txt"}} {
		got := files(t, repo, branches[task])
		for _, f := range want {
			if !slices.Contains(got, f) {
				t.Errorf("task %s's branch lacks %s: %v", task, f, got)
			}
		}
	}
	if got := show(t, repo, branches["a"], "src/built.txt"); got != "built by a" {
		t.Errorf("src/built.txt %q", got)
	}
	if got := show(t, repo, branches["c"], "README.md"); got != "# test repo" {
		t.Errorf("README.md on c's branch: %q: the refused write happened", got)
	}
	if slices.Contains(files(t, repo, branches["c"]), "escaped.txt") {
		t.Error("the write outside the worktree is on the branch")
	}
	for _, r := range rig.servers["nat-responses"].Requests() {
		if m, _ := r.Body["model"].(string); r.Method == "POST" && m != "test-model-b" {
			t.Errorf("task b's request asked for model %q, want its own", m)
		}
	}
	nativeReports(t, c, id)
	nativeEvents(t, c, id)
	nativeFleet(t, c, rig)
	nativeReplay(t, c, id, repo, branches["a"])
	for _, p := range []*proc{w, c.ctrl} {
		if p.logged(nativeKey) {
			t.Errorf("%s logged the API key", p.name)
		}
	}
}

// nativeReports: each report has the run's turns, usage, cost and tool
// calls; c's lists its two refusals; a's last answer has the key masked.
func nativeReports(t *testing.T, c *cluster, id string) {
	t.Helper()
	for task, turns := range map[string]int{"a": 3, "b": 3, "c": 4} {
		rep := c.report(id + "/" + task)
		if !rep.Success || rep.Turns != turns || rep.Usage == nil || rep.Usage.Model != "test-model" || count(rep.Usage.InputTokens) != int64(100*turns) ||
			rep.Usage.CostUSD == nil || *rep.Usage.CostUSD == 0 || rep.ToolCalls == nil || !strings.Contains(rep.StdoutTail, `"type":"native_finished"`) {
			t.Errorf("task %s's report: %+v (usage %+v)", task, rep, rep.Usage)
		}
	}
	// One key, one credential, whatever the provider; never the key.
	creds := map[string]bool{}
	for _, task := range []string{"a", "b", "c"} {
		creds[c.report(id+"/"+task).Credential] = true
	}
	if len(creds) != 1 || creds[""] || creds[nativeKey] {
		t.Errorf("credentials %v", creds)
	}
	rep := c.report(id + "/c")
	if len(rep.Refusals) != 2 || !strings.Contains(rep.Refusals[0], "write_file README.md") || !strings.Contains(rep.Refusals[1], "../escaped.txt") {
		t.Errorf("c's refusals %q", rep.Refusals)
	}
	if rep.ToolCalls["write_file"] != 3 {
		t.Errorf("c's tool calls %v", rep.ToolCalls)
	}
	a := c.report(id + "/a")
	if a.FinalText != "Added src/a.txt. (key [REDACTED])" {
		t.Errorf("a's final text %q", a.FinalText)
	}
	text, _, _ := c.cli("report", id+"/c")
	if !strings.Contains(text, "\nrefused: write_file README.md: ") || !strings.Contains(text, "\nturns: 4, tool calls: write_file 3\n") {
		t.Errorf("the report as text does not show the turns and the refusal:\n%s", text)
	}
}

// nativeEvents: runtime_capabilities_evaluated comes before runtime_started
// in each attempt, with the provider and a scope prevented; runtime_started
// has no process; nothing in the log holds the key; and `logs` shows the
// agent's turns: requests, tool calls and results, the end.
func nativeEvents(t *testing.T, c *cluster, id string) {
	t.Helper()
	evs := c.events(id)
	for task, provider := range map[string]string{"a": "anthropic", "b": "openai-responses", "c": "openai-chat"} {
		var order []event.Type
		for _, ev := range evs {
			if ev.Task == task && (ev.Type == event.RuntimeCapabilitiesEvaluated || ev.Type == event.RuntimeStarted) {
				order = append(order, ev.Type)
			}
		}
		if !slices.Equal(order, []event.Type{event.RuntimeCapabilitiesEvaluated, event.RuntimeStarted}) {
			t.Errorf("task %s: %v", task, order)
			continue
		}
		var caps event.RuntimeCapabilitiesEvaluatedData
		var started event.RuntimeStartedData
		if json.Unmarshal(ofType(evs, event.RuntimeCapabilitiesEvaluated, task)[0].Data, &caps) != nil ||
			json.Unmarshal(ofType(evs, event.RuntimeStarted, task)[0].Data, &started) != nil {
			t.Fatal("payloads do not decode")
		}
		model := "test-model"
		if task == "b" {
			model = "test-model-b" // the task's own
		}
		if caps.Adapter != "native" || caps.Provider != provider || caps.ScopeEnforcement != "prevented" || caps.Model != model || !slices.Contains(caps.Tools, "write_file") {
			t.Errorf("task %s's capabilities: %+v", task, caps)
		}
		if started.Pid != 0 || len(started.Argv) != 4 || started.Argv[0] != "native" || started.Argv[1] != provider || started.Argv[3] != model {
			t.Errorf("task %s's runtime_started: %+v", task, started)
		}
	}
	if all, _, _ := c.cli("events", id, "-o", "json"); strings.Contains(all, nativeKey) {
		t.Error("the API key is in the flow's events")
	}
	logs, errOut, code := c.cli("logs", id+"/c")
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"type":"native_started"`, `"type":"model_request"`, `"type":"model_response"`, `"type":"tool_call"`,
		`"tool":"write_file"`, `"refusal":{"tool":"write_file","path":"README.md"`, `"type":"native_finished"`, `"outcome":"completed"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs of c lack %s:\n%s", want, tail(logs, 3000))
		}
	}
	if logs, _, _ := c.cli("logs", id+"/a"); strings.Contains(logs, nativeKey) || !strings.Contains(logs, "[REDACTED]") {
		t.Errorf("a's log does not mask the key:\n%s", tail(logs, 2000))
	}
}

// nativeFleet: the worker's registration, `controller workers`, `runtime
// list` and `runtime health`, and the worker's own `runtime list/health`,
// show each native runtime with its provider, model and capabilities.
func nativeFleet(t *testing.T, c *cluster, rig *nativeRig) {
	t.Helper()
	out, _, code := c.cli("runtime", "health", "-o", "json")
	var health struct {
		Workers []*fleet.Registration `json:"workers"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &health) != nil || len(health.Workers) != 1 {
		t.Fatalf("runtime health: exit %d\n%s", code, out)
	}
	for _, h := range health.Workers[0].Runtimes {
		if !h.Healthy || h.Adapter != "native" || h.Provider == "" || h.Model != "test-model" || !strings.Contains(string(h.Capabilities), `"supports_model":true`) {
			t.Errorf("registration of %s: %+v", h.Name, h)
		}
	}
	text, _, _ := c.cli("workers")
	if !strings.Contains(text, "nat-anthropic test-model") || !strings.Contains(text, "(openai-chat)") {
		t.Errorf("controller workers:\n%s", text)
	}
	text, _, _ = c.cli("runtime", "list")
	if !regexpLine(text, `nat-responses\s+native\s+openai-responses\s+model, headless, models: test-model\s+worker-1`) {
		t.Errorf("controller runtime list:\n%s", text)
	}
	text, _, _ = c.cli("runtime", "health")
	if !regexpLine(text, `worker-1\s+nat-chat\s+native openai-chat\s+true\s+test-model`) {
		t.Errorf("controller runtime health:\n%s", text)
	}
	for _, args := range [][]string{{"runtime", "list"}, {"runtime", "health"}} {
		cmd := exec.Command(filepath.Join(bin, "worker"), args...)
		cmd.Env = append(cleanEnv(), rig.env...)
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "nat-anthropic") || !strings.Contains(string(b), "anthropic "+rig.servers["nat-anthropic"].BaseURL()) {
			t.Errorf("worker %v: %v\n%s", args, err, b)
		}
	}
}

// regexpLine reports whether a line of text matches pattern.
func regexpLine(text, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for line := range strings.Lines(text) {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// nativeReplay: task a's stored log, as `controller logs` prints it,
// replays through the mock model in a fresh checkout of the base: the same
// turns, the same tool calls, the same files as its result branch.
func nativeReplay(t *testing.T, c *cluster, id, repo, branch string) {
	t.Helper()
	logs, errOut, code := c.cli("logs", id+"/a")
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, errOut)
	}
	rec, err := native.ReadLog(strings.NewReader(logs))
	if err != nil {
		t.Fatalf("the stored log does not replay: %v", err)
	}
	if rec.Provider != "anthropic" || len(rec.Calls) != 3 || rec.Final == nil {
		t.Fatalf("recording %+v", rec)
	}
	wt := filepath.Join(t.TempDir(), "replay")
	git(t, filepath.Dir(wt), "clone", "-q", "--branch", "main", repo, wt)
	mock := nativetest.Replay(rec)
	rt := native.NewRuntime("replay", native.Config{Provider: "anthropic", Model: "test-model"}, mock)
	var out bytes.Buffer
	res, err := rt.Run(t.Context(), &native.Input{Prompt: "replayed", Worktree: wt, TempDir: t.TempDir(), Env: []string{"DROVER_TASK_ID=a"}}, &out)
	if err != nil || res.Outcome != native.Completed || res.Turns != rec.Final.Turns || mock.Left() != 0 ||
		!maps(res.ToolCalls, rec.Final.ToolCalls) {
		t.Fatalf("replay: %+v %v; recorded %+v", res, err, rec.Final)
	}
	for _, f := range []string{"src/a.txt", "src/built.txt"} {
		got, err := os.ReadFile(filepath.Join(wt, f))
		if want := show(t, repo, branch, f); err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("replayed %s: %q (%v), the branch has %q", f, got, err, want)
		}
	}
}

// count is a reported token count, -1 when unknown.
func count(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNativeFailures: a 429 with Retry-After is RATE_LIMITED with its wait
// and falls back to the next runtime; a refused key leaves the runtime
// healthy (with a note) and is AUTH_FAILED, which falls back too; each
// budget ends its attempt with its own class.
func TestNativeFailures(t *testing.T) {
	t.Parallel()
	rig := newNativeRig(t)
	limited := func(*nativetest.Turn) nativetest.Reply {
		return nativetest.Reply{Status: http.StatusTooManyRequests, ErrorType: "rate_limit_error", ErrorMessage: "slow down",
			Header: http.Header{"Retry-After": {"7"}}}
	}
	// A key of its own: the rate limit cools down what shares the key
	// (docs/design.md#cooldowns), and the fallback must not.
	const limitedKey = "e2e-native-limited-key-987"
	rig.env = append(rig.env, "E2E_LLM_PASS_LIMITED="+limitedKey)
	rig.addKeyed("nat-limited", "anthropic", limitedKey, "E2E_LLM_PASS_LIMITED", limited, "")
	rig.add("nat-badkey", "openai-responses", "a-key-the-worker-does-not-have", nativetest.Directed, "")
	rig.add("nat-ok", "openai-chat", nativeKey, nativetest.Directed, "")
	rig.add("nat-turns", "openai-chat", nativeKey, nativetest.Directed, "budget: {turns: 3}\n")
	rig.add("nat-tokens", "anthropic", nativeKey, nativetest.Directed, "budget: {tokens: 250}\n")
	rig.add("nat-time", "openai-responses", nativeKey, nativetest.Directed, "budget: {time: 1s}\n")
	c, _ := rig.start(4)
	// The refused key is no reason not to claim: attempts must run and fail.
	out, _, _ := c.cli("runtime", "health")
	if !regexpLine(out, `nat-badkey\s+native openai-responses\s+true\s+test-model: key refused \(HTTP 401\)`) {
		t.Errorf("runtime health:\n%s", out)
	}
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: native-failures
repo: `+repo+`
base: main
retry: {max_attempts: 2, initial_backoff: 1s, max_backoff: 1s}
tasks:
  - id: limited
    runtime: nat-limited
    retry: {fallback: [nat-ok]}
    prompt: "@write limited.txt done by the fallback"
  - id: badkey
    runtime: nat-badkey
    retry: {fallback: [nat-ok]}
    prompt: "@write badkey.txt done by the fallback"
  - id: turns
    runtime: nat-turns
    prompt: "@loop"
  - id: tokens
    runtime: nat-tokens
    prompt: |
      @usage 100 10
      @write t1.txt one
      @write t2.txt two
      @write t3.txt three
  - id: time
    runtime: nat-time
    prompt: "@hang"
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d (want 1: some tasks fail)\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	st := c.status(id)
	attempts := map[string][]*attemptView{}
	for _, a := range st.Detail.Attempts {
		attempts[a.Task] = append(attempts[a.Task], &attemptView{runtime: a.Runtime, rep: a.Report})
	}
	for task, fallback := range map[string]drovertype.ErrorClass{"limited": drovertype.ClassRateLimited, "badkey": drovertype.ClassAuthFailed} {
		as := attempts[task]
		if len(as) != 2 || as[0].rep == nil || as[0].rep.Error == nil || as[0].rep.Error.Class != fallback || as[1].runtime != "nat-ok" || as[1].rep == nil || !as[1].rep.Success {
			t.Errorf("task %s: attempts %v", task, as)
			continue
		}
		if branch := resultBranch(st, task); !slices.Contains(files(t, repo, branch), task+".txt") {
			t.Errorf("task %s's result lacks %s.txt", task, task)
		}
	}
	if e := attempts["limited"][0].rep.Error; e.RetryAfterMS != 7000 || e.Status != 429 || !e.Recoverable {
		t.Errorf("the rate limit: %+v", e)
	}
	if e := attempts["badkey"][0].rep.Error; e.Status != 401 || e.Recoverable {
		t.Errorf("the refused key: %+v", e)
	}
	for task, class := range map[string]drovertype.ErrorClass{
		"turns": drovertype.ClassTurnBudgetExhausted, "tokens": drovertype.ClassTokenBudgetExhausted, "time": drovertype.ClassTimeBudgetExhausted,
	} {
		as := attempts[task]
		// A budget class is not retried by default: one attempt, failed.
		if len(as) != 1 || as[0].rep == nil || as[0].rep.Error == nil || as[0].rep.Error.Class != class {
			t.Errorf("task %s: attempts %v", task, as)
		}
	}
	if rep := attempts["tokens"][0].rep; rep.Turns != 3 || rep.Usage == nil || count(rep.Usage.InputTokens) != 300 {
		t.Errorf("tokens: %+v", rep)
	}
}

type attemptView struct {
	runtime string
	rep     *event.Report
}

func (a *attemptView) String() string {
	if a.rep == nil {
		return a.runtime + ": no report"
	}
	return fmt.Sprintf("%s: success=%v error=%+v", a.runtime, a.rep.Success, a.rep.Error)
}

// resultBranch is a task's result branch in a flow's status.
func resultBranch(st *controller.StatusResponse, task string) string {
	for _, t := range st.Detail.Tasks {
		if t.ID == task {
			return t.ResultBranch
		}
	}
	return ""
}

// TestNativeFollowAndCancel: `controller logs -f` shows a running native
// attempt's turns as they happen, and an operator's cancel while a model
// call is in flight stops the attempt at once, with nothing pushed.
func TestNativeFollowAndCancel(t *testing.T) {
	t.Parallel()
	rig := newNativeRig(t)
	srv := rig.add("nat-hang", "anthropic", nativeKey, nativetest.Directed, "")
	c, _ := rig.start(1)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: native-cancel
repo: `+repo+`
base: main
tasks:
  - id: slow
    runtime: nat-hang
    prompt: |
      Write, then think forever.
      @write partial.txt written before the cancel
      @hang
`)
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	follow := c.cliAsync("logs", id+"/slow", "-f")
	select {
	case <-srv.Hung():
	case <-time.After(2 * time.Minute):
		t.Fatalf("the second model call never came\n%s", follow.out())
	}
	// The second call is in flight: what came before is on the live stream.
	waitFor(t, 30*time.Second, "logs -f to show the first turn", func() bool {
		o := follow.out()
		return strings.Contains(o, `"tool":"write_file"`) && strings.Contains(o, `"type":"tool_result"`) && strings.Contains(o, `"turn":2`)
	})
	if strings.Contains(follow.out(), `"type":"native_finished"`) {
		t.Fatal("the attempt finished before it was cancelled")
	}
	began := time.Now()
	if out, errOut, code := c.cli("cancel", id+"/slow", "--reason", "e2e"); code != 0 {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "the task to be cancelled", func() bool {
		st := c.status(id)
		return st.Detail.Flow.State.Terminal()
	})
	// At once: well inside the runtime's timeout and the model's hang.
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("the cancel took %s", took)
	}
	rep := c.report(id + "/slow")
	if rep.Success || rep.Error == nil || rep.Error.Class != drovertype.ClassCancelled || rep.Turns != 1 {
		t.Errorf("report %+v %+v", rep, rep.Error)
	}
	st := c.status(id)
	for _, a := range st.Detail.Attempts {
		if err := exec.Command("git", "--git-dir", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+a.Branch).Run(); err == nil {
			t.Errorf("the cancelled attempt's branch %s was pushed", a.Branch)
		}
	}
	if err := follow.wait(time.Minute); err != nil {
		t.Errorf("logs -f: %v\n%s", err, follow.out())
	}
	if o := follow.out(); !strings.Contains(o, `"outcome":"stopped"`) {
		t.Errorf("logs -f did not show the stop:\n%s", tail(o, 2000))
	}
}

// async is a CLI command running in the background.
type async struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{} // closed when it has exited, with err set
	err  error
}

func (a *async) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *async) out() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

func (a *async) wait(timeout time.Duration) error {
	select {
	case <-a.done:
		return a.err
	case <-time.After(timeout):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("still running after %s", timeout)
	}
}

// cliAsync starts a controller CLI command and returns at once.
func (c *cluster) cliAsync(args ...string) *async {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	args = append(args, "--data-dir", c.dataDir)
	a := &async{done: make(chan struct{})}
	a.cmd = exec.CommandContext(ctx, filepath.Join(bin, "controller"), args...)
	a.cmd.Env = append(cleanEnv(), c.cliEnv...)
	a.cmd.Stdout, a.cmd.Stderr = a, a
	if err := a.cmd.Start(); err != nil {
		cancel()
		c.t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
		cancel()
	}()
	c.t.Cleanup(func() { _ = a.wait(10 * time.Second) })
	return a
}
