package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// TestLargeFlow submits a flow of the most tasks a flow may have, with
// prompts that make it several megabytes: larger than a NATS message, so
// the request travels through the transfers store, the flow is recorded in
// parts, and the status reply comes back the same way.
func TestLargeFlow(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()

	spec := &flow.Spec{Name: "large", Repo: "/srv/repo.git", Base: "main", Runtime: "demo"}
	const tasks = 10_000 // flow.MaxTasks would only take longer
	for i := range tasks {
		task := flow.Task{ID: fmt.Sprintf("t%05d", i), Prompt: fmt.Sprintf("task %d: %s", i, strings.Repeat("x", 200))}
		if i%100 == 99 {
			task.DependsOn = []string{fmt.Sprintf("t%05d", i-1)}
		}
		spec.Tasks = append(spec.Tasks, task)
	}
	cl := &Client{NC: h.nc}
	id, err := cl.Submit(ctx, spec)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	parts := h.count(id, event.FlowTasksSubmitted)
	if parts < 2 {
		t.Errorf("%d flow_tasks_submitted events, want the flow in parts", parts)
	}
	st, err := cl.Status(ctx, id)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if n := len(st.Detail.Tasks); n != tasks {
		t.Fatalf("status shows %d tasks, want %d", n, tasks)
	}
	// In the flow's order, with plans and dependencies.
	for i, task := range st.Detail.Tasks[:200] {
		if task.Plan == nil || task.Plan.Worker.Name != "demo" {
			t.Fatalf("task %s: plan %+v", task.ID, task.Plan)
		}
		_ = i
	}
	var deps int
	for _, task := range st.Detail.Tasks {
		deps += len(task.DependsOn)
	}
	if deps != tasks/100 {
		t.Errorf("%d dependencies, want %d", deps, tasks/100)
	}
	h.waitFor("every independent task's first attempt", func(st *projection.State) bool {
		if st.Flows[id] == nil {
			return false
		}
		n := 0
		for _, task := range st.FlowTasks(st.Flows[id]) {
			if task.Attempts > 0 {
				n++
			}
		}
		return n == tasks-tasks/100
	})
	// Every task succeeds; the integration then merges all 10,000: its
	// decision fits in a message, its job is stored beside it.
	report := func(task string) {
		a := drovertype.AttemptID(id, task, 1)
		h.publish(event.AttemptClaimed, id, task, a, 1, event.AttemptClaimedData{Worker: "w"})
		h.publish(event.AttemptReported, id, task, a, 1, event.Report{Success: true,
			Branch: drovertype.AttemptBranch(id, task, 1), Commit: strings.Repeat("c", 40)})
	}
	for _, task := range spec.Tasks {
		if len(task.DependsOn) == 0 {
			report(task.ID)
		}
	}
	h.waitFor("the dependents' attempts", func(st *projection.State) bool {
		return st.Attempts[drovertype.AttemptID(id, "t09999", 1)] != nil
	})
	for _, task := range spec.Tasks {
		if len(task.DependsOn) > 0 {
			report(task.ID)
		}
	}
	h.waitFor("the integration", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	job := h.lastJob(t)
	if job.Kind != drovertype.JobIntegrate || len(job.Merge) != tasks {
		t.Fatalf("integration job: kind %q, %d merges", job.Kind, len(job.Merge))
	}
	if m := job.Merge[9999]; m.Task != "t09999" || m.Branch != drovertype.AttemptBranch(id, "t09999", 1) {
		t.Errorf("last merge %+v", m)
	}
	if s, err := h.js.Stream(ctx, queue.AttemptsStream); err != nil {
		t.Fatal(err)
	} else if m, err := s.GetLastMsgForSubject(ctx, queue.AttemptSubject("default", "demo")); err != nil || m.Header.Get(queue.JobBodyHeader) == "" {
		t.Errorf("the integration job of %d results is not in the jobs store (%v)", tasks, err)
	}
	// A page of the flow carries the merges of its own tasks, not the
	// whole list (a line per task); the projection keeps the whole.
	pg, err := cl.StatusPage(ctx, StatusRequest{Flow: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if in := pg.Detail.Flow.Integration; in == nil || len(in.Merge) != 100 || in.Merge[99].Task != "t00099" {
		t.Errorf("a page of 100 tasks carries the integration %+v", in)
	}
	h.store.Read(func(st *projection.State) {
		if n := len(st.Flows[id].Integration.Merge); n != tasks {
			t.Errorf("the projection's integration merges %d results after a page was read, want %d", n, tasks)
		}
		if len(st.Parts) != 0 {
			t.Errorf("%d parts left in the projection", len(st.Parts))
		}
	})
	res, err := h.ctrl.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal {
		t.Errorf("rebuild differs: %v", res.Diffs)
	}
	t.Logf("%d tasks in %d parts", tasks, parts)
}

// lastJob reads the newest job off the attempts stream.
func (h *harness) lastJob(t *testing.T) *queue.Job {
	t.Helper()
	s, err := h.js.Stream(context.Background(), queue.AttemptsStream)
	if err != nil {
		t.Fatal(err)
	}
	var job *queue.Job
	deadline := time.Now().Add(30 * time.Second)
	for job == nil || job.Kind != drovertype.JobIntegrate {
		if time.Now().After(deadline) {
			t.Fatal("no integration job")
		}
		m, err := s.GetLastMsgForSubject(context.Background(), queue.AttemptSubject("default", "demo"))
		if err == nil {
			if job, err = queue.ReadJob(context.Background(), h.js, m.Header, m.Data); err != nil {
				t.Fatalf("decode job of %d bytes: %v", len(m.Data), err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return job
}

// TestSubmitWhileDeciding: API requests wait for their events to be folded
// while the decision loop plans a large flow and the fold commits. The
// decision loop once took the controller's mutex under the store's read
// lock, the reverse of the order in which a request waits for the fold;
// with a commit waiting for the store between them, all three stopped and
// every later request timed out.
func TestSubmitWhileDeciding(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	cl := &Client{NC: h.nc, Timeout: 20 * time.Second}
	big := &flow.Spec{Name: "big", Repo: "/srv/repo.git", Base: "main", Runtime: "demo"}
	for i := range 3000 {
		big.Tasks = append(big.Tasks, flow.Task{ID: fmt.Sprintf("t%05d", i), Prompt: "p"})
	}
	if _, err := cl.Submit(ctx, big); err != nil {
		t.Fatalf("submit: %v", err)
	}
	small := &flow.Spec{Name: "small", Repo: "/srv/repo.git", Base: "main", Runtime: "demo",
		Tasks: []flow.Task{{ID: "a", Prompt: "p"}}}
	for i := range 40 {
		if _, err := cl.Submit(ctx, small); err != nil {
			t.Fatalf("submit %d while the controller decides: %v", i+1, err)
		}
	}
}
