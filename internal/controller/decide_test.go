package controller

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/event"
	"github.com/drover-dev/drover/internal/projection"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

// planWorld is a folded state and a controller whose decision function runs
// over it without NATS: the test folds the decisions it wants to keep.
type planWorld struct {
	t   testing.TB
	st  *projection.State
	c   *Controller
	seq uint64
	now time.Time
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newPlanWorld(t testing.TB, mutate func(*config.Config)) *planWorld {
	cfg := &config.Config{Defaults: config.Defaults{Pool: "default"},
		Runtimes: map[string]config.Runtime{"demo": {}, "codex": {}, "claude-code": {}}}
	if mutate != nil {
		mutate(cfg)
	}
	w := &planWorld{t: t, st: projection.NewState(), now: t0}
	w.c = New(cfg, nil, nil, slog.New(slog.DiscardHandler))
	w.c.now = func() time.Time { return w.now }
	return w
}

// submit folds a flow resolved as the API would.
func (w *planWorld) submit(id string, spec *flow.Spec) {
	w.t.Helper()
	data, err := Accept(w.c.cfg, spec)
	if err != nil {
		w.t.Fatal(err)
	}
	w.apply(event.New("flow_submitted:"+id, event.FlowSubmitted, w.now, id, "", "", 0, data))
}

func (w *planWorld) apply(ev *event.Event, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq++
	if err := w.st.Apply(w.seq, ev); err != nil {
		w.t.Fatal(err)
	}
}

// plan runs the decision function; with fold, its events are folded.
func (w *planWorld) plan(fold bool) []action {
	w.t.Helper()
	acts, err := w.c.decisions(w.st)
	if err != nil {
		w.t.Fatal(err)
	}
	if fold {
		for _, a := range acts {
			if a.event != nil {
				w.apply(a.event, nil)
			}
		}
	}
	return acts
}

// worker plays a worker: claim and report an attempt.
func (w *planWorld) report(attempt string, rep event.Report) {
	w.t.Helper()
	a := w.st.Attempts[attempt]
	if rep.Branch != "" {
		rep.Branch = a.Branch // a worker reports only its attempt's own branch
	}
	w.apply(event.New(drovertype.ClaimEventID(event.AttemptClaimed, attempt, 1), event.AttemptClaimed, w.now, a.Flow, a.Task, attempt, 1, event.AttemptClaimedData{Worker: "w"}))
	w.apply(event.New(drovertype.ClaimEventID(event.AttemptReported, attempt, 1), event.AttemptReported, w.now, a.Flow, a.Task, attempt, 1, rep))
}

func summary(acts []action) string {
	var out []string
	for _, a := range acts {
		switch {
		case a.event != nil:
			out = append(out, string(a.event.Type)+" "+a.event.Task)
		case a.job != nil:
			out = append(out, "job "+a.job.Attempt)
		case a.stop != nil:
			out = append(out, "stop "+a.stop.ID)
		}
	}
	return strings.Join(out, ", ")
}

func count(acts []action, typ event.Type) int {
	n := 0
	for _, a := range acts {
		if a.event != nil && a.event.Type == typ {
			n++
		}
	}
	return n
}

func independent(n int) *flow.Spec {
	s := &flow.Spec{Name: "f", Repo: "/r", Base: "main", Runtime: "demo"}
	for i := range n {
		s.Tasks = append(s.Tasks, flow.Task{ID: fmt.Sprintf("t%d", i), Prompt: "p"})
	}
	return s
}

func TestPlanConcurrencyLimits(t *testing.T) {
	t.Run("flow max_parallel", func(t *testing.T) {
		w := newPlanWorld(t, nil)
		s := independent(5)
		s.MaxParallel = 2
		w.submit("f1", s)
		if n := count(w.plan(true), event.AttemptScheduled); n != 2 {
			t.Fatalf("scheduled %d, want 2", n)
		}
		if n := count(w.plan(true), event.AttemptScheduled); n != 0 {
			t.Fatalf("scheduled %d more while 2 run, want 0", n)
		}
		w.report(drovertype.AttemptID("f1", "t0", 1), event.Report{Success: true})
		if n := count(w.plan(true), event.AttemptScheduled); n != 1 {
			t.Fatalf("scheduled %d after one ended, want 1", n)
		}
	})
	t.Run("global max_parallel, oldest flow first", func(t *testing.T) {
		w := newPlanWorld(t, func(c *config.Config) { c.Controller.MaxParallel = 3 })
		w.submit("old", independent(2))
		w.now = w.now.Add(time.Second)
		w.submit("new", independent(2))
		acts := w.plan(true)
		if got := summary(acts); got != "attempt_scheduled t0, attempt_scheduled t1, attempt_scheduled t0" {
			t.Fatalf("actions: %s", got)
		}
		if acts[2].event.Flow != "new" {
			t.Errorf("third attempt for %s, want new", acts[2].event.Flow)
		}
	})
	t.Run("project and defaults max_parallel", func(t *testing.T) {
		w := newPlanWorld(t, func(c *config.Config) {
			c.Defaults.MaxParallel = 4
			c.Projects = map[string]config.Project{"web": {Repo: "/web", MaxParallel: 1}}
		})
		s := independent(3)
		s.Project, s.Repo = "web", ""
		w.submit("f1", s)
		if n := count(w.plan(true), event.AttemptScheduled); n != 1 {
			t.Fatalf("scheduled %d, want the project's 1", n)
		}
		if a := w.st.Attempts[drovertype.AttemptID("f1", "t0", 1)]; a == nil || w.st.Flows["f1"].Spec.Repo != "/web" {
			t.Errorf("the project's repo is not used: %q", w.st.Flows["f1"].Spec.Repo)
		}
	})
	t.Run("paused", func(t *testing.T) {
		w := newPlanWorld(t, nil)
		w.submit("f1", independent(2))
		w.apply(event.New("flow_paused:p", event.FlowPaused, w.now, "f1", "", "", 0, event.OperatorData{}))
		if acts := w.plan(true); len(acts) != 0 {
			t.Fatalf("paused flow: %s", summary(acts))
		}
		w.apply(event.New("flow_resumed:r", event.FlowResumed, w.now, "f1", "", "", 0, event.OperatorData{}))
		if n := count(w.plan(true), event.AttemptScheduled); n != 2 {
			t.Fatalf("resumed: scheduled %d, want 2", n)
		}
	})
}

// TestPlanFailures: class × attempt number × policy → decision, through the
// controller's events.
func TestPlanFailures(t *testing.T) {
	fail := func(class drovertype.ErrorClass) event.Report {
		return event.Report{StderrTail: "it broke", Error: &event.ErrorInfo{Class: class, Message: string(class) + " happened"}}
	}
	cases := []struct {
		name  string
		retry *flow.RetrySpec
		fails []drovertype.ErrorClass // classes of consecutive failures
		want  string                  // the last decision: strategy@runtime, or failed
	}{
		{"timeout retries on the same runtime", nil, []drovertype.ErrorClass{"RUNTIME_TIMEOUT"}, "same_runtime_retry@demo"},
		{"timeout twice, then the budget of 3 is spent", nil, []drovertype.ErrorClass{"RUNTIME_TIMEOUT", "RUNTIME_TIMEOUT", "RUNTIME_TIMEOUT"}, "failed"},
		{"runtime error is not retryable", nil, []drovertype.ErrorClass{"RUNTIME_ERROR"}, "failed"},
		{"runtime error made retryable", &flow.RetrySpec{RetryOn: []drovertype.ErrorClass{"RUNTIME_ERROR"}}, []drovertype.ErrorClass{"RUNTIME_ERROR"}, "same_runtime_retry@demo"},
		{"rate limit falls back", &flow.RetrySpec{Fallback: []string{"codex"}}, []drovertype.ErrorClass{"RATE_LIMITED"}, "fallback_runtime@codex"},
		{"rate limit on the last runtime retries it", &flow.RetrySpec{Fallback: []string{"codex"}}, []drovertype.ErrorClass{"RATE_LIMITED", "RATE_LIMITED"}, "same_runtime_retry@codex"},
		{"auth failure falls back", &flow.RetrySpec{Fallback: []string{"codex"}}, []drovertype.ErrorClass{"AUTH_FAILED"}, "fallback_runtime@codex"},
		{"auth failure without fallback fails", nil, []drovertype.ErrorClass{"AUTH_FAILED"}, "failed"},
		{"scope violation fails at once", nil, []drovertype.ErrorClass{"SCOPE_VIOLATION"}, "failed"},
		{"verification failure retries", nil, []drovertype.ErrorClass{"VERIFICATION_FAILED"}, "same_runtime_retry@demo"},
		{"max_attempts 1", &flow.RetrySpec{MaxAttempts: ptr(1)}, []drovertype.ErrorClass{"RUNTIME_TIMEOUT"}, "failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newPlanWorld(t, nil)
			s := independent(1)
			s.Retry = tc.retry
			w.submit("f", s)
			var last string
			for i, class := range tc.fails {
				w.plan(true) // schedules attempt i+1 (due at once: the test moves the clock)
				id := drovertype.AttemptID("f", "t0", i+1)
				if w.st.Attempts[id] == nil {
					t.Fatalf("attempt %d not scheduled; task %+v", i+1, w.st.Task("f", "t0"))
				}
				w.report(id, fail(class))
				w.plan(true) // classify
				acts := w.plan(true)
				last = "none"
				for _, a := range acts {
					switch {
					case a.event == nil:
					case a.event.Type == event.TaskFailed:
						last = "failed"
					case a.event.Type == event.RuntimeRecoveryScheduled:
						var d event.RuntimeRecoveryScheduledData
						_ = a.event.Payload(&d)
						last = string(d.Strategy) + "@" + d.Runtime
					}
				}
				w.now = w.now.Add(10 * time.Minute)
			}
			if last != tc.want {
				t.Errorf("decision %s, want %s", last, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestPlanRetryWaitsForItsTime: the retry is due at the failed attempt's end
// plus the backoff, whatever the clock says when the decision is re-derived,
// and its prompt carries the failure.
func TestPlanRetryWaitsForItsTime(t *testing.T) {
	w := newPlanWorld(t, nil)
	s := independent(1)
	s.Retry = &flow.RetrySpec{InitialBackoff: ptr(flow.Duration(30 * time.Second)), Jitter: ptr(0.0)}
	s.Tasks[0].Verify = []string{"make check"}
	w.submit("f", s)
	w.plan(true)
	id := drovertype.AttemptID("f", "t0", 1)
	w.report(id, event.Report{Error: &event.ErrorInfo{Class: "VERIFICATION_FAILED", Message: "`make check` exited 2"},
		Verification: &event.Verification{Commands: []event.CommandResult{{Command: "make check", ExitCode: 2, Output: "CHECK-OUTPUT-42"}}}})
	ended := w.st.Attempts[id].EndedAt
	w.plan(true)
	w.now = w.now.Add(5 * time.Second) // the decision is made later than the failure
	w.plan(true)
	task := w.st.Task("f", "t0")
	if task.State != drovertype.TaskRetrying || !task.Retry.DueAt.Equal(ended.Add(30*time.Second)) {
		t.Fatalf("task %s, retry %+v; want retrying, due %s", task.State, task.Retry, ended.Add(30*time.Second))
	}
	w.now = ended.Add(29 * time.Second)
	if acts := w.plan(true); len(acts) != 0 {
		t.Fatalf("before due: %s", summary(acts))
	}
	w.now = ended.Add(30 * time.Second)
	if n := count(w.plan(true), event.AttemptScheduled); n != 1 {
		t.Fatal("the due retry was not scheduled")
	}
	a2 := w.st.Attempts[drovertype.AttemptID("f", "t0", 2)]
	if !strings.Contains(a2.Prompt, "CHECK-OUTPUT-42") || !strings.HasPrefix(a2.Prompt, "p") {
		t.Errorf("retry prompt lacks the check output:\n%s", a2.Prompt)
	}
	if j := w.c.job(w.st.Flows["f"], task, a2); j.Prompt != a2.Prompt || len(j.Verify) != 1 {
		t.Errorf("job %+v", j)
	}
}

// TestPlanCancelAndIntegrate: cancelling a task stops its attempt and blocks
// its dependent; the flow integrates what succeeded, then completes.
func TestPlanCancelAndIntegrate(t *testing.T) {
	w := newPlanWorld(t, nil)
	s := independent(2)
	s.Tasks = append(s.Tasks, flow.Task{ID: "after", Prompt: "p", DependsOn: []string{"t1"}})
	w.submit("f", s)
	w.plan(true)
	w.report(drovertype.AttemptID("f", "t0", 1), event.Report{Success: true, Branch: "drover/f/t0/1", Commit: "c0"})
	w.apply(event.New("cancel_requested:1", event.CancelRequested, w.now, "f", "t1", "", 0, event.CancelRequestedData{Scope: event.CancelTask}))
	if got := summary(w.plan(true)); got != "task_cancelled t1" {
		t.Fatalf("after the cancel request: %s", got)
	}
	if got := summary(w.plan(true)); got != "stop f_t1_1" {
		t.Fatalf("with the attempt still queued: %s", got)
	}
	if b := w.st.Task("f", "after"); b.State != drovertype.TaskBlocked || b.BlockedBy != "t1" {
		t.Errorf("after: %s by %q", b.State, b.BlockedBy)
	}
	w.apply(event.New("attempt_abandoned:f_t1_1", event.AttemptAbandoned, w.now, "f", "t1", "f_t1_1", 0, event.AttemptAbandonedData{Reason: "x"}))
	acts := w.plan(true)
	if got := summary(acts); got != "integration_scheduled " {
		t.Fatalf("all ended: %s", got)
	}
	in := w.st.Flows["f"].Integration
	if in == nil || len(in.Merge) != 1 || in.Merge[0].Task != "t0" {
		t.Fatalf("integration %+v", in)
	}
	if got := summary(w.plan(true)); got != "job "+drovertype.IntegrationID("f", 1) {
		t.Fatalf("integration job: %s", got)
	}
	w.apply(event.New(drovertype.ClaimEventID(event.FlowIntegrated, drovertype.IntegrationID("f", 1), 1), event.FlowIntegrated, w.now, "f", "", drovertype.IntegrationID("f", 1), 1,
		event.FlowIntegratedData{N: 1, Branch: in.Branch, Commit: "i1"}))
	w.plan(true)
	if st := w.st.Flows["f"].State; st != drovertype.FlowFailed {
		t.Errorf("flow %s, want failed (a task was cancelled)", st)
	}
}

// TestPlanRetryDuringIntegration: an operator retry that lands after the
// integration was scheduled starts a new round; the stale round's
// integration and completion do not finish the flow, and the new round's
// integration has the retried task's result.
func TestPlanRetryDuringIntegration(t *testing.T) {
	w := newPlanWorld(t, nil)
	w.submit("f", independent(2))
	w.plan(true)
	w.report(drovertype.AttemptID("f", "t0", 1), event.Report{Success: true, Branch: "b0", Commit: "c0"})
	w.report(drovertype.AttemptID("f", "t1", 1), event.Report{Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Message: "x"}})
	w.plan(true) // classify
	w.plan(true) // fail t1
	if got := summary(w.plan(true)); got != "integration_scheduled " {
		t.Fatalf("actions: %s", got)
	}
	stale := w.plan(false) // the job, then (had it been built) a completion of round 0
	w.apply(event.New("task_retry_requested:1", event.TaskRetryRequested, w.now, "f", "t1", "", 0, event.OperatorData{}))
	w.apply(event.New(drovertype.ClaimEventID(event.FlowIntegrated, drovertype.IntegrationID("f", 1), 1), event.FlowIntegrated, w.now, "f", "", drovertype.IntegrationID("f", 1), 1,
		event.FlowIntegratedData{N: 1, Branch: drovertype.IntegrationBranch("f", 1), Commit: "i1"}))
	w.apply(event.New("flow_completed:f", event.FlowCompleted, w.now, "f", "", "", 0,
		event.FlowCompletedData{State: drovertype.FlowFailed}))
	if f := w.st.Flows["f"]; f.State != drovertype.FlowRunning || f.Round != 1 {
		t.Fatalf("after the retry: flow %s round %d (stale actions %s)", f.State, f.Round, summary(stale))
	}
	w.plan(true)
	w.report(drovertype.AttemptID("f", "t1", 2), event.Report{Success: true, Branch: "b1", Commit: "c1"})
	w.plan(true)
	in := w.st.Flows["f"].Integration
	if in.N != 2 || len(in.Merge) != 2 || in.Branch != drovertype.IntegrationBranch("f", 2) {
		t.Fatalf("round 1 integration %+v", in)
	}
	w.apply(event.New(drovertype.ClaimEventID(event.FlowIntegrated, drovertype.IntegrationID("f", 2), 1), event.FlowIntegrated, w.now, "f", "", drovertype.IntegrationID("f", 2), 1,
		event.FlowIntegratedData{N: 2, Branch: in.Branch, Commit: "i2"}))
	w.plan(true)
	if st := w.st.Flows["f"].State; st != drovertype.FlowSucceeded {
		t.Errorf("flow %s, want succeeded", st)
	}
}

// BenchmarkDecisions is one run of the decision function over a running flow of
// 10,000 tasks: every attempt queued and published, a tenth of them
// reported. What it costs bounds how often the controller decides (see
// decideLoop).
func BenchmarkDecisions(b *testing.B) {
	w := newPlanWorld(b, nil)
	w.submit("f", independent(10_000))
	w.plan(true)
	for i := range 10_000 {
		id := drovertype.AttemptID("f", fmt.Sprintf("t%d", i), 1)
		w.c.published.add(id)
		if i%10 == 0 {
			w.report(id, event.Report{Success: true, Branch: "b", Commit: strings.Repeat("c", 40)})
		}
	}
	for b.Loop() {
		if _, err := w.c.decisions(w.st); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlanForgetsPublishedJobs: the controller remembers which jobs it
// queued only while their attempts are queued, so a long-lived controller
// does not keep one entry per attempt it ever ran.
func TestPlanForgetsPublishedJobs(t *testing.T) {
	w := newPlanWorld(t, nil)
	w.submit("f", independent(3))
	w.plan(true)
	if got := summary(w.plan(false)); got != "job f_t0_1, job f_t1_1, job f_t2_1" {
		t.Fatalf("jobs: %s", got)
	}
	for i := range 3 {
		w.c.published.add(drovertype.AttemptID("f", fmt.Sprintf("t%d", i), 1))
	}
	w.report(drovertype.AttemptID("f", "t1", 1), event.Report{Success: true, Branch: "b", Commit: strings.Repeat("c", 40)})
	if got := summary(w.plan(false)); got != "" {
		t.Fatalf("published jobs queued again: %s", got)
	}
	if len(w.c.published.jobs) != 2 || w.c.published.has(drovertype.AttemptID("f", "t1", 1)) {
		t.Errorf("published = %v, want the two still queued", w.c.published.jobs)
	}
}
