package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// placementEvents returns a flow's placement_changed and attempt_unplaced
// events, decoded.
func placementEvents(t *testing.T, evs []*event.Event) (changes []event.PlacementChangedData, at []time.Time, unplaced []*event.Event) {
	t.Helper()
	for _, ev := range evs {
		switch ev.Type {
		case event.PlacementChanged:
			var d event.PlacementChangedData
			if err := ev.Payload(&d); err != nil {
				t.Fatal(err)
			}
			changes, at = append(changes, d), append(at, ev.Time)
		case event.AttemptUnplaced:
			unplaced = append(unplaced, ev)
		}
	}
	return changes, at, unplaced
}

// waitsFor returns why a task waits, as status says, "" when it does not.
func waitsFor(st *controller.StatusResponse, task string) string {
	if w := st.Detail.Waiting[task]; w != nil {
		return w.Reason
	}
	return ""
}

// TestPlacementNoWorker: a flow on a runtime no worker can run (claude is
// not installed on the only worker). submit warns at once; within one of
// the worker's heartbeats the task's status says why it waits; after its
// placement timeout its attempt fails NO_WORKER and the fallback runtime
// (codex, which the worker has) succeeds. Meanwhile the controller is
// killed (SIGKILL) and started again: the restarted one finds the wait in
// the log and ends the attempt when the first one would have, not a
// placement timeout after its own start. watch, started after the
// restart, shows the wait too.
func TestPlacementNoWorker(t *testing.T) {
	t.Parallel()
	const heartbeat = 5 * time.Second
	env := append(personaEnv(t, map[string]string{"codex": "codex"}),
		"DROVER_RUNTIMES_CLAUDE_CODE_BINARY=/nonexistent/claude", "DROVER_WORKER_HEALTH_INTERVAL="+heartbeat.String())
	c := startController(t)
	c.startFleet(2, []string{"worker-1"}, env...)
	repo := newRepo(t)
	const timeout = 20 * time.Second
	flowFile := writeFlow(t, `name: noworker
repo: `+repo+`
base: main
runtime: claude-code
placement_timeout: 20s
tasks:
  - id: port
    retry: {fallback: [codex]}
    prompt: create hello.txt containing hi
`)
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errOut)
	}
	submitted := time.Now()
	id := submittedID(t, out)
	const why = "no live worker serves claude-code in pool default: 1 worker: "
	if !strings.Contains(errOut, "warning: "+why) || !strings.Contains(errOut, "(needed as the runtime of task port)") {
		t.Errorf("submit did not warn:\n%s", errOut)
	}
	if _, errOut, code := c.cli("submit", "--strict", flowFile); code != 6 || !strings.Contains(errOut, "refused (--strict): "+why) {
		t.Errorf("submit --strict: exit %d: %s", code, errOut)
	}
	// Within a heartbeat, status says why the task waits.
	var reason string
	waitFor(t, heartbeat, "status to say why the task waits", func() bool {
		reason = waitsFor(c.status(id), "port")
		return reason != ""
	})
	if !strings.HasPrefix(reason, why) || !strings.Contains(reason, "/nonexistent/claude") {
		t.Errorf("the task waits because %q", reason)
	}
	t.Logf("%s after submission: %s", time.Since(submitted).Round(time.Millisecond), reason)
	if text, _, _ := c.cli("status", id); !strings.Contains(text, "waits: "+why) || !strings.Contains(text, "NO WORKER") {
		t.Errorf("status does not show the wait:\n%s", text)
	}
	if text, _, _ := c.cli("status", id, "--task", "port"); !strings.Contains(text, "waits since ") || !strings.Contains(text, why) {
		t.Errorf("status --task does not show the wait:\n%s", text)
	}

	// The controller dies mid-wait, 8s into it, and comes back.
	waitFor(t, time.Minute, "the task to have waited 8s", func() bool {
		w := c.status(id).Detail.Waiting["port"]
		return w != nil && time.Since(w.Since) >= 8*time.Second
	})
	c.restartController(true)
	c.ctrl.waitLog(time.Minute, "controller serving")
	restarted := time.Now()
	var watched string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watched, _, _ = c.cli("watch", id)
	}()
	st := c.waitFlow(id, 3*time.Minute, drovertype.FlowSucceeded)
	wg.Wait()
	if !strings.Contains(watched, "waits: "+why) {
		t.Errorf("watch does not show the wait:\n%s", watched)
	}
	a1, a2 := attemptsOf(st)[drovertype.AttemptID(id, "port", 1)], attemptsOf(st)[drovertype.AttemptID(id, "port", 2)]
	if classOf(a1) != drovertype.ClassNoWorker || a2 == nil || a2.Runtime != "codex" || a2.State != drovertype.AttemptSucceeded {
		t.Fatalf("attempt 1 %+v, attempt 2 %+v: want NO_WORKER, then a success on codex", a1, a2)
	}
	changes, at, unplaced := placementEvents(t, c.events(id))
	if len(changes) == 0 || changes[0].Serving != 0 || len(unplaced) != 1 {
		t.Fatalf("placement events %+v, unplaced %d", changes, len(unplaced))
	}
	// Decided from the log: a timeout after the wait began, not a timeout
	// after the restarted controller read the registry (at least 8s
	// later).
	waited := unplaced[0].Time.Sub(at[0])
	t.Logf("unplaced %s after the wait began, %s after the restart", waited.Round(time.Millisecond), unplaced[0].Time.Sub(restarted).Round(time.Millisecond))
	if waited < timeout {
		t.Errorf("the attempt ended %s after the wait began, before its placement timeout (%s)", waited, timeout)
	}
	if !unplaced[0].Time.Before(restarted.Add(timeout - 4*time.Second)) {
		t.Errorf("the attempt ended %s after the restart: the restarted controller counted the wait from its own start", unplaced[0].Time.Sub(restarted))
	}
	if w := st.Detail.Waiting["port"]; w != nil {
		t.Errorf("the task still waits: %+v", w)
	}
	c.rebuildEqual()
}

// TestPlacementWorkerArrives: a flow on gemini and codex, which the only
// worker lists but cannot run (their CLIs are not installed). The tasks
// say why they wait. Then gemini's CLI is installed: the worker finds it
// at its next health check and takes its task; and a worker that has
// codex is started: it takes the other. Both well before the placement
// timeout: the waits clear and the flow succeeds, no attempt taken back.
func TestPlacementWorkerArrives(t *testing.T) {
	t.Parallel()
	transcripts, err := filepath.Abs("../testdata/transcripts")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "gemini") // installed later
	env := []string{"DROVER_RUNTIMES_GEMINI_BINARY=" + link, "DROVER_RUNTIMES_GEMINI_ENV=DEMO_AGENT_TRANSCRIPTS=" + transcripts,
		"DROVER_RUNTIMES_GEMINI_SANDBOX_READ=" + transcripts, "DROVER_WORKER_HEALTH_INTERVAL=1s", "DROVER_RUNTIMES_CODEX_BINARY=/nonexistent/codex"}
	c := startController(t)
	c.startFleet(1, []string{"worker-1"}, env...)
	repo := newRepo(t)
	id := c.submit(`name: arrives
repo: ` + repo + `
base: main
runtime: gemini
placement_timeout: 10m
tasks:
  - {id: a, prompt: create hello.txt containing hi}
  - {id: b, prompt: create hello.txt containing hi, runtime: codex}
`)
	var st *controller.StatusResponse
	waitFor(t, time.Minute, "status to say why the tasks wait", func() bool {
		st = c.status(id)
		return waitsFor(st, "a") != "" && waitsFor(st, "b") != ""
	})
	for task, runtime := range map[string]string{"a": "gemini", "b": "codex"} {
		if r := waitsFor(st, task); !strings.HasPrefix(r, "no live worker serves "+runtime+" in pool default: 1 worker: ") {
			t.Errorf("task %s waits because %q", task, r)
		}
	}
	if err := os.Symlink(filepath.Join(bin, "demo-agent"), link); err != nil {
		t.Fatal(err)
	}
	installed := time.Now()
	c.startFleet(1, []string{"worker-2"}, append(personaEnv(t, map[string]string{"codex": "codex"}), "DROVER_WORKER_RUNTIMES=codex")...)
	st = c.waitFlow(id, 2*time.Minute, drovertype.FlowSucceeded)
	for task, worker := range map[string]string{"a": "worker-1", "b": "worker-2"} {
		a := attemptsOf(st)[drovertype.AttemptID(id, task, 1)]
		if a == nil || a.State != drovertype.AttemptSucceeded || a.Worker != worker {
			t.Fatalf("task %s's attempt 1: %+v, want a success on %s", task, a, worker)
		}
		t.Logf("task %s claimed by %s %s after the CLI was installed", task, worker, a.ClaimedAt.Sub(installed).Round(time.Millisecond))
	}
	// Each runtime's findings: unserved first (the reason may change as
	// workers come), served last.
	changes, _, unplaced := placementEvents(t, c.events(id))
	first, last := map[string]int{}, map[string]int{}
	for _, ch := range changes {
		if _, ok := first[ch.Runtime]; !ok {
			first[ch.Runtime] = ch.Serving
		}
		last[ch.Runtime] = ch.Serving
	}
	if len(unplaced) != 0 || len(first) != 2 || first["gemini"] != 0 || first["codex"] != 0 || last["gemini"] == 0 || last["codex"] == 0 {
		t.Errorf("placement events %+v, %d taken back: want each runtime unserved, then served", changes, len(unplaced))
	}
	if len(st.Unserved) != 0 {
		t.Errorf("status still lists runtimes no worker serves: %+v", st.Unserved)
	}
	c.rebuildEqual()
}

// TestPlacementBusyWorkers: the misleading case. One worker with one
// slot, busy with long attempts while the others are queued behind it,
// far longer than the placement timeout: a worker serves the runtime all
// along, so nothing is recorded, nothing times out, and every task runs
// in turn.
func TestPlacementBusyWorkers(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startFleet(1, []string{"worker-1"}, "DROVER_WORKER_HEALTH_INTERVAL=1s")
	repo := newRepo(t)
	var b strings.Builder
	b.WriteString("name: busy\nrepo: " + repo + "\nbase: main\nruntime: demo\nplacement_timeout: 1s\ntasks:\n")
	for _, task := range []string{"a", "b", "c"} {
		b.WriteString("  - {id: " + task + ", prompt: \"@sleep 3s\\n@write " + task + ".txt done\"}\n")
	}
	id := c.submit(b.String())
	st := c.waitFlow(id, 3*time.Minute, drovertype.FlowSucceeded)
	changes, _, unplaced := placementEvents(t, c.events(id))
	if len(changes) != 0 || len(unplaced) != 0 {
		t.Errorf("queued behind a busy worker: %+v, %d taken back", changes, len(unplaced))
	}
	for _, a := range st.Detail.Attempts {
		if a.N != 1 || a.State != drovertype.AttemptSucceeded {
			t.Errorf("attempt %s: %s", a.ID, a.State)
		}
	}
}
