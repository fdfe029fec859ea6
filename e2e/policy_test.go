package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
)

// personaEnv points built-in runtimes at the demo agent impersonating their
// CLIs (a symlink named like the CLI) replaying the recorded transcripts.
func personaEnv(t *testing.T, clis map[string]string) []string {
	t.Helper()
	transcripts, err := filepath.Abs("../testdata/transcripts")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var env []string
	for runtime, cli := range clis {
		link := filepath.Join(dir, cli)
		if err := os.Symlink(filepath.Join(bin, "demo-agent"), link); err != nil {
			t.Fatal(err)
		}
		key := "DROVER_RUNTIMES_" + strings.ToUpper(strings.ReplaceAll(runtime, "-", "_"))
		env = append(env, key+"_BINARY="+link, key+"_ENV=DEMO_AGENT_TRANSCRIPTS="+transcripts,
			key+"_SANDBOX_READ="+transcripts) // confined, the fake reads its transcripts there
	}
	// claude refuses to skip permissions as root unless told it is sandboxed.
	return append(env, "IS_SANDBOX=1")
}

// events returns a flow's events in stream order.
func (c *cluster) events(flowID string) []*event.Event {
	c.t.Helper()
	out, errOut, code := c.cli("events", flowID, "-o", "json")
	if code != 0 {
		c.t.Fatalf("events: exit %d: %s", code, errOut)
	}
	var evs []*event.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev event.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			c.t.Fatalf("events: %v: %s", err, line)
		}
		evs = append(evs, &ev)
	}
	return evs
}

func ofType(evs []*event.Event, typ event.Type, task string) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if ev.Type == typ && (task == "" || ev.Task == task) {
			out = append(out, ev)
		}
	}
	return out
}

func byTask(st *projection.Attempt, d map[string][]*projection.Attempt) {
	d[st.Task] = append(d[st.Task], st)
}

// TestRetryFallbackVerifyScope runs one flow whose tasks each exercise a
// policy path with fake CLIs: a rate limit falls back to the next runtime; a
// timeout retries on the same runtime after a backoff; a failed verification
// and a failed review retry with their output in the next prompt; a scope
// violation fails at once, is not pushed, and blocks its dependent. The
// integration branch collects what succeeded.
func TestRetryFallbackVerifyScope(t *testing.T) {
	t.Parallel()
	env := personaEnv(t, map[string]string{"claude-code": "claude", "codex": "codex"})
	c := startController(t, env...)
	c.startWorker("worker-1", 3, env...)
	c.startWorker("worker-2", 3, env...)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: policy
repo: `+repo+`
base: main
runtime: demo
retry: {initial_backoff: 1s, max_backoff: 2s}
placement_timeout: 5m
tasks:
  - id: fallback
    runtime: claude-code
    retry: {fallback: [codex]}
    prompt: |
      create hello.txt containing hi
      @on-attempt 1 @case fail-429
  - id: slow
    timeout: 2s
    prompt: |
      @on-attempt 1 @hang
      @write slow.txt done
  - id: verified
    verify: ["test -f ok.txt || { echo VERIFY-MISSING-ok.txt; exit 1; }"]
    prompt: |
      @on-attempt 1 @write other.txt wrong file
      @after-attempt 1 @write ok.txt fine
  - id: reviewed
    review: true
    validator: demo-review
    prompt: |
      @on-attempt 1 @write review.txt REJECT me
      @after-attempt 1 @write review.txt fine
  - id: scoped
    scope: {allow: ["src/**"]}
    prompt: |
      @write src/a.txt inside
      @write secrets.txt outside
  - id: after-scoped
    depends_on: [scoped]
    prompt: "@write never.txt x"
`)
	// What each task runs with, and from which level.
	res, errOut, code := c.cli("runtime", "resolve", "--flow", flowFile, "--task", "fallback")
	if code != 0 {
		t.Fatalf("runtime resolve: exit %d: %s", code, errOut)
	}
	for _, want := range [][]string{
		{"worker", "claude-code", "from", "task"},
		{"retry.fallback", "codex", "from", "task"},
		{"retry.initial_backoff", "1s", "from", "flow"},
		{"retry.max_attempts", "3", "from", "builtin"},
		{"retry.rate_limit_wait", "2h0m0s", "from", "builtin"},
		{"placement_timeout", "5m0s", "from", "flow"},
	} {
		if !slices.ContainsFunc(strings.Split(res, "\n"), func(l string) bool { return slices.Equal(strings.Fields(l), want) }) {
			t.Errorf("runtime resolve lacks %v:\n%s", want, res)
		}
	}
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1 (scoped fails)\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	st := c.status(id)
	tasks := map[string]*projection.Task{}
	for _, task := range st.Detail.Tasks {
		tasks[task.ID] = task
	}
	attempts := map[string][]*projection.Attempt{}
	for _, a := range st.Detail.Attempts {
		byTask(a, attempts)
	}
	for _, at := range attempts {
		slices.SortFunc(at, func(a, b *projection.Attempt) int { return a.N - b.N })
	}
	evs := c.events(id)
	recovery := func(task string) event.RuntimeRecoveryScheduledData {
		t.Helper()
		rs := ofType(evs, event.RuntimeRecoveryScheduled, task)
		if len(rs) != 1 {
			t.Fatalf("%s: %d runtime_recovery_scheduled events, want 1", task, len(rs))
		}
		var d event.RuntimeRecoveryScheduledData
		if err := rs[0].Payload(&d); err != nil {
			t.Fatal(err)
		}
		if len(ofType(evs, event.RuntimeErrorClassified, task)) != 1 {
			t.Errorf("%s: want one runtime_error_classified before the recovery", task)
		}
		return d
	}
	for _, id := range []string{"fallback", "slow", "verified", "reviewed"} {
		if tasks[id].State != drovertype.TaskSucceeded || len(attempts[id]) != 2 {
			t.Errorf("%s: %s after %d attempts, want succeeded after 2 (error %+v)", id, tasks[id].State, len(attempts[id]), tasks[id].Error)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// A rate limit falls back to the next runtime at once.
	if d := recovery("fallback"); d.Strategy != drovertype.StrategyFallback || d.Runtime != "codex" || d.DelayMS != 0 {
		t.Errorf("fallback recovery %+v", d)
	}
	if a := attempts["fallback"]; a[0].Runtime != "claude-code" || a[0].Error.Class != "RATE_LIMITED" || a[1].Runtime != "codex" {
		t.Errorf("fallback attempts: %s %+v, then %s", a[0].Runtime, a[0].Error, a[1].Runtime)
	}

	// A timeout retries on the same runtime after the backoff.
	d := recovery("slow")
	if d.Strategy != drovertype.StrategySameRuntime || d.Runtime != "demo" || d.DelayMS < 800 || d.DelayMS > 1200 {
		t.Errorf("slow recovery %+v, want same runtime after 1s±20%%", d)
	}
	if a := attempts["slow"]; a[0].Error.Class != "RUNTIME_TIMEOUT" || a[1].ScheduledAt.Before(a[0].EndedAt.Add(time.Duration(d.DelayMS)*time.Millisecond)) {
		t.Errorf("slow: attempt 1 %+v ended %s, attempt 2 scheduled %s (delay %dms)", a[0].Error, a[0].EndedAt, a[1].ScheduledAt, d.DelayMS)
	}

	// A failed check retries with its output in the next prompt.
	if a := attempts["verified"]; a[0].Error.Class != "VERIFICATION_FAILED" || !strings.Contains(a[1].Prompt, "VERIFY-MISSING-ok.txt") {
		t.Errorf("verified: attempt 1 %+v; attempt 2 prompt:\n%s", a[0].Error, a[1].Prompt)
	}
	taskOut, _, code := c.cli("status", id, "--task", "verified")
	if code != 0 || !strings.Contains(taskOut, "VERIFY-MISSING-ok.txt") || !strings.Contains(taskOut, "Feedback from attempt 1") {
		t.Errorf("status --task verified (exit %d) does not show the composed prompt:\n%s", code, taskOut)
	}
	if a := attempts["reviewed"]; a[0].Error.Class != "VERIFICATION_FAILED" || !strings.Contains(a[0].Error.Message, "REJECT") ||
		!strings.Contains(a[1].Prompt, "REJECT at review.txt") {
		t.Errorf("reviewed: attempt 1 %+v; attempt 2 prompt:\n%s", a[0].Error, a[1].Prompt)
	}

	// A scope violation fails at once, is not pushed, and blocks its dependent.
	if s := tasks["scoped"]; s.State != drovertype.TaskFailed || s.Error.Class != "SCOPE_VIOLATION" || len(attempts["scoped"]) != 1 {
		t.Errorf("scoped: %s %+v after %d attempts", s.State, s.Error, len(attempts["scoped"]))
	}
	if v := attempts["scoped"][0].Report; v == nil || !slices.ContainsFunc(v.ScopeViolations, func(s string) bool { return strings.HasPrefix(s, "secrets.txt") }) {
		t.Errorf("scoped report: %+v", v)
	}
	if refs := git(t, repo, "branch", "--list", "drover/"+id+"/scoped/*"); refs != "" {
		t.Errorf("the out-of-scope attempt was pushed: %s", refs)
	}
	if b := tasks["after-scoped"]; b.State != drovertype.TaskBlocked || b.BlockedBy != "scoped" {
		t.Errorf("after-scoped: %s by %q", b.State, b.BlockedBy)
	}

	// The integration branch has every succeeded task's work and nothing else.
	in := st.Detail.Flow.Integration
	if in == nil || in.State != drovertype.IntegrationSucceeded || in.Branch != drovertype.IntegrationBranch(id, 1) {
		t.Fatalf("integration %+v", in)
	}
	got := files(t, repo, in.Branch)
	for _, f := range []string{"hello.txt", "slow.txt", "ok.txt", "review.txt", "README.md"} {
		if !slices.Contains(got, f) {
			t.Errorf("integration branch lacks %s: %v", f, got)
		}
	}
	for _, f := range []string{"secrets.txt", "src/a.txt", "never.txt"} {
		if slices.Contains(got, f) {
			t.Errorf("integration branch has %s: %v", f, got)
		}
	}
	if r, _, _ := c.cli("rebuild"); !strings.Contains(r, "equal") {
		t.Errorf("rebuild: %s", r)
	}
}

// TestCancelStopsRemoteCLI cancels a flow while a worker process runs its
// CLI: the CLI's whole process group is gone within seconds, the task and
// the flow end cancelled, and the dependent never starts.
func TestCancelStopsRemoteCLI(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: cancel
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: long
    timeout: 10m
    prompt: |
      @spawn-grandchild
      @hang
  - id: next
    depends_on: [long]
    prompt: "@write next.txt x"
`)
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, errOut)
	}
	id := submittedID(t, out)
	waitFor(t, 60*time.Second, "the CLI to run", func() bool {
		for _, a := range c.status(id).Detail.Attempts {
			if a.Phase == event.RuntimeStarted {
				return true
			}
		}
		return false
	})
	began := time.Now()
	if out, errOut, code := c.cli("cancel", id, "--reason", "test"); code != 0 || !strings.Contains(out, "cancelling flow") {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errOut)
	}
	var st = c.status(id)
	waitFor(t, 30*time.Second, "the flow to end cancelled", func() bool {
		st = c.status(id)
		return st.Detail.Flow.State == drovertype.FlowCancelled
	})
	t.Logf("cancelled in %s", time.Since(began).Round(time.Millisecond))
	if c := st.Detail.Flow.Cancel; c == nil || c.Reason != "test" {
		t.Errorf("the cancel request's reason is not recorded: %+v", c)
	}
	a := st.Detail.Attempts[0]
	if len(st.Detail.Attempts) != 1 || a.State != drovertype.AttemptFailed || a.Report == nil || a.Report.Error == nil || a.Report.Error.Class != "CANCELLED" {
		t.Fatalf("attempts: %+v", st.Detail.Attempts)
	}
	for _, task := range st.Detail.Tasks {
		// The dependent is blocked by the cancelled task, or cancelled itself.
		if task.State != drovertype.TaskCancelled && (task.ID != "next" || task.State != drovertype.TaskBlocked) {
			t.Errorf("%s: %s, want cancelled", task.ID, task.State)
		}
	}
	// The grandchild the CLI started in its group is gone too.
	_, pidText, ok := strings.Cut(a.Report.StderrTail, "grandchild pid ")
	if !ok {
		t.Fatalf("no grandchild pid in stderr: %q", a.Report.StderrTail)
	}
	pid, err := strconv.Atoi(strings.Fields(pidText)[0])
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("grandchild %d to be gone", pid), func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}

// TestOperatorRetryAndPause: a failed task retried by the operator runs
// again with its blocked dependent and the flow finishes anew; a paused flow
// starts nothing until resumed.
func TestOperatorRetryAndPause(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: ops
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: flaky
    prompt: |
      @on-attempt 1 @exit 3
      @write flaky.txt ok
  - id: next
    depends_on: [flaky]
    prompt: "@write next.txt ok"
`)
	out, _, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1\n%s", code, out)
	}
	id := submittedID(t, out)
	if out, errOut, code := c.cli("retry", id+"/next"); code != 0 || !strings.Contains(out, "retrying flaky") {
		t.Fatalf("retry: exit %d\n%s\n%s", code, out, errOut)
	}
	var st = c.status(id)
	waitFor(t, 60*time.Second, "the flow to succeed after the retry", func() bool {
		st = c.status(id)
		return st.Detail.Flow.State == drovertype.FlowSucceeded
	})
	if in := st.Detail.Flow.Integration; in == nil || in.Branch != drovertype.IntegrationBranch(id, 2) ||
		!slices.Contains(files(t, repo, in.Branch), "next.txt") {
		t.Errorf("integration after the retry: %+v", in)
	}
	if _, _, code := c.cli("retry", id+"/flaky"); code != 2 {
		t.Errorf("retrying a succeeded task: exit %d, want 2", code)
	}

	// Pause: the first task may already be running (it takes a few seconds,
	// so that a CLI process slow to start on a loaded machine still pauses
	// the flow before it ends); the second must wait.
	out, _, code = c.cli("submit", writeFlow(t, `name: paused
repo: `+repo+`
base: main
runtime: demo
tasks:
  - {id: first, prompt: "@sleep 6s\n@write first.txt ok"}
  - {id: next, depends_on: [first], prompt: "@write next.txt ok"}
`))
	if code != 0 {
		t.Fatalf("submit: exit %d", code)
	}
	id2 := submittedID(t, out)
	if _, errOut, code := c.cli("pause", id2); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	time.Sleep(4 * time.Second)
	st = c.status(id2)
	for _, task := range st.Detail.Tasks {
		if task.ID == "next" && task.State != drovertype.TaskPending && task.State != drovertype.TaskBlocked {
			t.Errorf("next started while the flow was paused: %s", task.State)
		}
	}
	if _, errOut, code := c.cli("resume", id2); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	waitFor(t, 60*time.Second, "the resumed flow to succeed", func() bool {
		return c.status(id2).Detail.Flow.State == drovertype.FlowSucceeded
	})
}

// TestControllerKilledDuringBackoff kills the controller with SIGKILL while
// a retry waits out its backoff: the restarted controller schedules the
// retry once, at its time, and the flow finishes.
func TestControllerKilledDuringBackoff(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 1)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: backoff
repo: `+repo+`
base: main
runtime: demo
retry: {retry_on: [RUNTIME_ERROR], initial_backoff: 5s, max_backoff: 5s, jitter: 0}
tasks:
  - id: flaky
    prompt: |
      @on-attempt 1 @exit 4
      @write flaky.txt ok
`)
	out, _, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: exit %d", code)
	}
	id := submittedID(t, out)
	var due time.Time
	waitFor(t, 60*time.Second, "the retry to be scheduled", func() bool {
		task := c.status(id).Detail.Tasks[0]
		if task.State == drovertype.TaskRetrying && task.Retry != nil {
			due = task.Retry.DueAt
			return true
		}
		return false
	})
	c.restartController(true)
	var st = c.status(id)
	waitFor(t, 60*time.Second, "the flow to succeed", func() bool {
		st = c.status(id)
		return st.Detail.Flow.State == drovertype.FlowSucceeded
	})
	if len(st.Detail.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(st.Detail.Attempts))
	}
	if a := st.Detail.Attempts[1]; a.ScheduledAt.Before(due) {
		t.Errorf("retry scheduled at %s, before its due time %s", a.ScheduledAt, due)
	}
	evs := c.events(id)
	if n, m := len(ofType(evs, event.AttemptScheduled, "")), len(ofType(evs, event.RuntimeRecoveryScheduled, "")); n != 2 || m != 1 {
		t.Errorf("attempt_scheduled %d (want 2), runtime_recovery_scheduled %d (want 1)", n, m)
	}
	if r, _, _ := c.cli("rebuild"); !strings.Contains(r, "equal") {
		t.Errorf("rebuild: %s", r)
	}
}

// TestMergeConflict: two tasks change one file differently; the task that
// depends on both fails with MERGE_CONFLICT naming the path, without a
// retry, and so does the flow's integration of the two.
func TestMergeConflict(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: conflict
repo: `+repo+`
base: main
runtime: demo
tasks:
  - {id: left, prompt: "@write same.txt left"}
  - {id: right, prompt: "@write same.txt right"}
  - {id: both, depends_on: [left, right], prompt: "@write both.txt x"}
`)
	out, _, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1\n%s", code, out)
	}
	st := c.status(submittedID(t, out))
	for _, task := range st.Detail.Tasks {
		if task.ID != "both" {
			continue
		}
		if task.State != drovertype.TaskFailed || task.Error.Class != "MERGE_CONFLICT" || !strings.Contains(task.Error.Message, "same.txt") || task.Attempts != 1 {
			t.Errorf("both: %s after %d attempts: %+v", task.State, task.Attempts, task.Error)
		}
	}
	in := st.Detail.Flow.Integration
	if in == nil || in.State != drovertype.IntegrationFailed || in.Error.Class != "MERGE_CONFLICT" || !strings.Contains(in.Error.Message, "same.txt") {
		t.Errorf("integration: %+v", in)
	}
}
