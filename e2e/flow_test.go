package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/fleet"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// TestFlowAcrossWorkers runs a flow of four tasks through a controller and
// two worker processes: two independent tasks, one that depends on both, and
// one whose CLI fails.
func TestFlowAcrossWorkers(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 1, "DROVER_WORKER_RUNTIMES=demo,codex")
	c.startWorker("worker-2", 1, "DROVER_WORKER_RUNTIMES=demo,codex")
	repo := newRepo(t)

	flowFile := writeFlow(t, `
name: e2e
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: a
    prompt: |
      Write a.
      @write a.txt from a
  - id: b
    prompt: |
      Write b.
      @write b.txt from b
      @commit the agent commits b itself
  - id: c
    depends_on: [a, b]
    prompt: |
      Combine a and b.
      @require a.txt
      @require b.txt
      @write c.txt saw a and b
  - id: d
    prompt: |
      Fail loudly.
      @stderr fatal: the disk is on fire
      @exit 3
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit --watch of a flow with a failing task: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	st := c.status(id)
	if st.Detail.Flow.State != drovertype.FlowFailed {
		t.Errorf("flow state %s, want failed", st.Detail.Flow.State)
	}
	want := map[string]drovertype.TaskState{"a": drovertype.TaskSucceeded, "b": drovertype.TaskSucceeded, "c": drovertype.TaskSucceeded, "d": drovertype.TaskFailed}
	tasks := map[string]*projection.Task{}
	for _, task := range st.Detail.Tasks {
		tasks[task.ID] = task
		if task.State != want[task.ID] {
			t.Errorf("task %s: state %s, want %s (error %+v)", task.ID, task.State, want[task.ID], task.Error)
		}
	}

	// Each result branch was pushed and holds exactly what its task made.
	if got := files(t, repo, tasks["a"].ResultBranch); !slices.Equal(got, []string{"README.md", "a.txt"}) {
		t.Errorf("branch of a has %v", got)
	}
	if got := files(t, repo, tasks["b"].ResultBranch); !slices.Equal(got, []string{"README.md", "b.txt"}) {
		t.Errorf("branch of b has %v", got)
	}
	// The dependent task started from a tree with both dependencies' results.
	if got := files(t, repo, tasks["c"].ResultBranch); !slices.Equal(got, []string{"README.md", "a.txt", "b.txt", "c.txt"}) {
		t.Errorf("branch of c has %v", got)
	}
	if got := show(t, repo, tasks["c"].ResultBranch, "a.txt"); got != "from a" {
		t.Errorf("c's a.txt = %q", got)
	}

	attempts := map[string]*projection.Attempt{}
	for _, a := range st.Detail.Attempts {
		attempts[a.Task] = a
	}
	// b's agent committed on its own: the report lists that commit.
	if rb := attempts["b"].Report; rb == nil || len(rb.CommitsCreated) != 1 || !slices.Contains(rb.FilesCreated, "b.txt") {
		t.Errorf("b's report: %+v", rb)
	}
	// The failing attempt's stderr tail is in its report, and its class.
	rd := attempts["d"].Report
	if rd == nil || rd.Success || rd.ExitCode != 3 || !strings.Contains(rd.StderrTail, "the disk is on fire") {
		t.Errorf("d's report: %+v", rd)
	}
	if e := tasks["d"].Error; e == nil || e.Class != "RUNTIME_ERROR" {
		t.Errorf("d's error: %+v", e)
	}
	for _, a := range st.Detail.Attempts {
		if a.Worker != "worker-1" && a.Worker != "worker-2" {
			t.Errorf("attempt %s ran on %q", a.ID, a.Worker)
		}
	}

	// The fleet: both workers registered, demo healthy on each, codex (no
	// binary here) reported unhealthy with the reason.
	out, _, code = c.cli("workers", "-o", "json")
	var ws []fleet.Registration
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil || len(ws) != 2 {
		t.Fatalf("workers: exit %d\n%s", code, out)
	}
	for _, w := range ws {
		health := map[string]fleet.RuntimeHealth{}
		for _, r := range w.Runtimes {
			health[r.Name] = r
		}
		if !health["demo"].Healthy || health["demo"].Version != "demo-agent 1.0.0" {
			t.Errorf("worker %s: demo runtime %+v", w.ID, health["demo"])
		}
		if h, ok := health["codex"]; !ok || h.Healthy || !strings.Contains(h.Error, "not in PATH") {
			t.Errorf("worker %s: codex runtime %+v", w.ID, h)
		}
	}
	out, _, code = c.cli("runtime", "list")
	if code != 0 || !strings.Contains(out, "worker-1, worker-2") {
		t.Errorf("runtime list: exit %d\n%s", code, out)
	}

	// The projection is a pure fold of the log.
	out, errOut, code = c.cli("rebuild")
	if code != 0 || !strings.Contains(out, "equals the live projection") {
		t.Errorf("rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	// The events of the flow are readable in order.
	out, _, code = c.cli("events", id)
	if code != 0 || !strings.Contains(out, "flow_submitted") || !strings.Contains(out, "flow_completed") {
		t.Errorf("events: exit %d\n%s", code, out)
	}
}
