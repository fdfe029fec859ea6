package controller

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
)

// The decisions themselves are tested by the scenario files in
// testdata/decide (decide_scenario_test.go). What is here is what a
// scenario cannot show: what the decision function costs, and what the
// controller keeps in memory between rounds.

// decisionWorld is a folded state and a controller whose decision function
// runs over it without NATS: the test folds the decisions it wants to keep.
type decisionWorld struct {
	t   testing.TB
	st  *projection.State
	c   *Controller
	seq uint64
	now time.Time
}

func newDecisionWorld(t testing.TB) *decisionWorld {
	cfg := &config.Config{Defaults: config.Defaults{Pool: "default"}, Runtimes: map[string]config.Runtime{"demo": {}}}
	w := &decisionWorld{t: t, st: projection.NewState(), now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	w.c = New(cfg, nil, nil, slog.New(slog.DiscardHandler))
	w.c.now = func() time.Time { return w.now }
	return w
}

// submit folds a flow resolved as the API would.
func (w *decisionWorld) submit(id string, spec *flow.Spec) {
	w.t.Helper()
	data, err := Accept(w.c.cfg, spec)
	if err != nil {
		w.t.Fatal(err)
	}
	w.apply(event.New(drovertype.EventID(event.FlowSubmitted, id), event.FlowSubmitted, w.now, id, "", "", 0, data))
}

func (w *decisionWorld) apply(ev *event.Event, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq++
	if err := w.st.Apply(w.seq, ev); err != nil {
		w.t.Fatal(err)
	}
}

// decide runs the decision function; with fold, its events are folded.
func (w *decisionWorld) decide(fold bool) []action {
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

// report plays a worker: claim and report an attempt.
func (w *decisionWorld) report(attempt string, rep event.Report) {
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

func independent(n int) *flow.Spec {
	s := &flow.Spec{Name: "f", Repo: "/r", Base: "main", Runtime: "demo"}
	for i := range n {
		s.Tasks = append(s.Tasks, flow.Task{ID: fmt.Sprintf("t%d", i), Prompt: "p"})
	}
	return s
}

// BenchmarkDecisions is one run of the decision function over a running flow of
// 10,000 tasks: every attempt queued and published, a tenth of them
// reported. What it costs bounds how often the controller decides (see
// decideLoop).
func BenchmarkDecisions(b *testing.B) {
	benchmarkRunningFlow(b, func(i int) bool { return i%10 == 0 })
}

// benchmarkRunningFlow times a round over a flow of 10,000 tasks whose
// attempts are all queued and published, task i's reported a success
// when done says so.
func benchmarkRunningFlow(b *testing.B, done func(i int) bool) {
	w := newDecisionWorld(b)
	w.submit("f", independent(10_000))
	w.decide(true)
	for i := range 10_000 {
		id := drovertype.AttemptID("f", fmt.Sprintf("t%d", i), 1)
		w.c.published.add(id)
		if done(i) {
			w.report(id, event.Report{Success: true, Branch: "b", Commit: strings.Repeat("c", 40)})
		}
	}
	for b.Loop() {
		if _, err := w.c.decisions(w.st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionsFinishing is BenchmarkDecisions late in the flow's
// life: 9,990 of its 10,000 tasks have succeeded, 10 are queued. A round
// costs what is open in the flow, not all it has run: the settled tasks
// are not walked (projection.State.OpenTasks).
func BenchmarkDecisionsFinishing(b *testing.B) {
	benchmarkRunningFlow(b, func(i int) bool { return i >= 10 })
}

// BenchmarkDecisionsSchedule is the round that schedules a new flow's
// 10,000 tasks and the one after, that queues their jobs, without the
// folds between: what the decisions cost per task a flow starts (a
// task's spec was found by walking the flow's, the square of its size).
func BenchmarkDecisionsSchedule(b *testing.B) {
	spec := independent(10_000)
	for b.Loop() {
		b.StopTimer()
		w := newDecisionWorld(b)
		w.submit("f", spec)
		b.StartTimer()
		acts := w.decide(false)
		b.StopTimer()
		for _, a := range acts {
			w.apply(a.event, nil)
		}
		b.StartTimer()
		w.decide(false)
	}
}

// BenchmarkDecisionsPlacement is BenchmarkDecisions with the registry
// read: every queued attempt asks whether a live worker serves its
// runtime, served by one (the common case) or by none, whose wait is
// recorded (the first round) and counted against the placement timeout.
func BenchmarkDecisionsPlacement(b *testing.B) {
	for _, served := range []bool{true, false} {
		name := map[bool]string{true: "served", false: "unserved"}[served]
		b.Run(name, func(b *testing.B) {
			w := newDecisionWorld(b)
			w.submit("f", independent(10_000))
			w.decide(true)
			health := fleet.RuntimeHealth{Name: "demo", Healthy: served, Error: map[bool]string{false: "demo: not found"}[served]}
			w.c.fleet.Put(&fleet.Registration{ID: "w1", Pool: "default", Runtimes: []fleet.RuntimeHealth{health}}, w.now)
			w.c.fleet.SetReady(true)
			for i := range 10_000 {
				w.c.published.add(drovertype.AttemptID("f", fmt.Sprintf("t%d", i), 1))
			}
			w.decide(true) // records the wait, when there is one
			for b.Loop() {
				if _, err := w.c.decisions(w.st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecideForgetsPublishedJobs: the controller remembers which jobs it
// queued only while their attempts are queued, so a long-lived controller
// does not keep one entry per attempt it ever ran.
func TestDecideForgetsPublishedJobs(t *testing.T) {
	w := newDecisionWorld(t)
	w.submit("f", independent(3))
	w.decide(true)
	if got := summary(w.decide(false)); got != "job f_t0_1, job f_t1_1, job f_t2_1" {
		t.Fatalf("jobs: %s", got)
	}
	for i := range 3 {
		w.c.published.add(drovertype.AttemptID("f", fmt.Sprintf("t%d", i), 1))
	}
	w.report(drovertype.AttemptID("f", "t1", 1), event.Report{Success: true, Branch: "b", Commit: strings.Repeat("c", 40)})
	if got := summary(w.decide(false)); got != "" {
		t.Fatalf("published jobs queued again: %s", got)
	}
	if len(w.c.published.jobs) != 2 || w.c.published.has(drovertype.AttemptID("f", "t1", 1)) {
		t.Errorf("published = %v, want the two still queued", w.c.published.jobs)
	}
}

// TestStartsPerRound: a round schedules at most startsPerRound attempts,
// and the round after queues their jobs before it schedules more: with
// every ready task started at once, a large flow's first job waited for
// all of its decisions to be stored.
func TestStartsPerRound(t *testing.T) {
	w := newDecisionWorld(t)
	w.submit("f", independent(2*startsPerRound+startsPerRound/2))
	count := func(acts []action) (jobs, scheduled int, order string) {
		for _, a := range acts {
			switch {
			case a.job != nil:
				jobs++
				if scheduled > 0 {
					order = "a job after a decision"
				}
			case a.event != nil && a.event.Type == event.AttemptScheduled:
				scheduled++
			}
		}
		return jobs, scheduled, order
	}
	for i, want := range []struct{ jobs, scheduled int }{
		{0, startsPerRound}, {startsPerRound, startsPerRound}, {startsPerRound, startsPerRound / 2}, {startsPerRound / 2, 0},
	} {
		acts := w.decide(true)
		for _, a := range acts {
			if a.job != nil {
				w.c.published.add(a.job.Attempt)
			}
		}
		jobs, scheduled, order := count(acts)
		if jobs != want.jobs || scheduled != want.scheduled || order != "" {
			t.Errorf("round %d: %d jobs, %d scheduled %s; want %d jobs, then %d scheduled", i+1, jobs, scheduled, order, want.jobs, want.scheduled)
		}
	}
}

// TestJobsFirst: a round's jobs are published before its other actions
// (decide orders them so), even a newer flow's jobs before an older
// flow's new decisions, each group in the decision function's order.
func TestJobsFirst(t *testing.T) {
	w := newDecisionWorld(t)
	w.submit("b", independent(2))
	w.decide(true)
	w.submit("a", independent(2)) // first in the walk: the same time, the smaller id
	acts := w.decide(false)
	if got := summary(acts); got != "attempt_scheduled t0, attempt_scheduled t1, job b_t0_1, job b_t1_1" {
		t.Fatalf("the decision function's order: %s", got)
	}
	jobsFirst(acts)
	if got := summary(acts); got != "job b_t0_1, job b_t1_1, attempt_scheduled t0, attempt_scheduled t1" {
		t.Errorf("published in the order %s", got)
	}
}
