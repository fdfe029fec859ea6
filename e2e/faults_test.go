package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// lease is the claim lease (queue.ack_wait) of the fault tests: short, so a
// lost worker is found in seconds.
const lease = "DROVER_QUEUE_ACK_WAIT=2s"

// attemptOf returns the attempt of a status by id.
func attemptOf(st *controller.StatusResponse, id string) *projection.Attempt {
	for _, a := range st.Detail.Attempts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// running waits until the attempt's CLI has started and returns its pid.
func (c *cluster) running(flowID, attempt string) int {
	c.t.Helper()
	pid := 0
	waitFor(c.t, 60*time.Second, attempt+"'s CLI to start", func() bool {
		for _, a := range c.status(flowID).Detail.Attempts {
			if a.ID == attempt && a.Pid > 0 && a.State == drovertype.AttemptClaimed {
				pid = a.Pid
				return true
			}
		}
		return false
	})
	return pid
}

// gone reports whether a process no longer runs (a zombie has ended).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func (c *cluster) submit(flowYAML string) string {
	c.t.Helper()
	out, errOut, code := c.cli("submit", writeFlow(c.t, flowYAML))
	if code != 0 {
		c.t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	return submittedID(c.t, out)
}

func (c *cluster) waitFlow(id string, timeout time.Duration, want drovertype.FlowState) *controller.StatusResponse {
	c.t.Helper()
	var st *controller.StatusResponse
	waitFor(c.t, timeout, "flow "+id+" to end", func() bool {
		st = c.status(id)
		return st.Detail.Flow.State.Terminal()
	})
	if st.Detail.Flow.State != want {
		for _, task := range st.Detail.Tasks {
			c.t.Logf("task %s: %s %+v", task.ID, task.State, task.Error)
		}
		c.t.Fatalf("flow %s %s, want %s", id, st.Detail.Flow.State, want)
	}
	return st
}

func (c *cluster) rebuildEqual() {
	c.t.Helper()
	out, errOut, code := c.cli("rebuild")
	if code != 0 || !strings.Contains(out, "equals the live projection") {
		c.t.Errorf("rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
}

// slowFlow is a flow of one task, "slow", whose first attempt sleeps for
// firstSleep before writing slow.txt; later attempts write it at once.
func slowFlow(name, repo, firstSleep string) string {
	return `name: ` + name + `
repo: ` + repo + `
base: main
runtime: demo
retry: {initial_backoff: 100ms}
tasks:
  - id: slow
    prompt: |
      @on-attempt 1 @sleep ` + firstSleep + `
      @write slow.txt done
`
}

// TestWorkerKilledMidAttempt: a worker is killed with SIGKILL while its CLI
// runs. The CLI dies with it; once the lease lapses the controller records
// the attempt lost, and the task retries on another worker.
func TestWorkerKilledMidAttempt(t *testing.T) {
	t.Parallel()
	c := startController(t, lease)
	victim := c.startWorker("victim", 1, lease)
	repo := newRepo(t)
	id := c.submit(slowFlow("killed", repo, "10m"))
	a1, a2 := drovertype.AttemptID(id, "slow", 1), drovertype.AttemptID(id, "slow", 2)
	pid := c.running(id, a1)
	victim.kill()
	waitFor(t, 10*time.Second, "the killed worker's CLI to die with it", func() bool { return gone(pid) })
	c.startWorker("rescuer", 1, lease)

	st := c.waitFlow(id, 60*time.Second, drovertype.FlowSucceeded)
	lost, retry := attemptOf(st, a1), attemptOf(st, a2)
	if lost == nil || lost.State != drovertype.AttemptFailed || lost.Error == nil || lost.Error.Class != "WORKER_LOST" || lost.Worker != "victim" {
		t.Errorf("attempt 1: %+v", lost)
	}
	if retry == nil || retry.State != drovertype.AttemptSucceeded || retry.Worker != "rescuer" {
		t.Errorf("attempt 2: %+v", retry)
	}
	if evs := ofType(c.events(id), event.AttemptLost, ""); len(evs) != 1 || evs[0].Epoch != 1 {
		t.Errorf("attempt_lost events: %d, want 1 at epoch 1", len(evs))
	}
	if got := show(t, repo, retry.Branch, "slow.txt"); got != "done" {
		t.Errorf("slow.txt = %q", got)
	}
	c.rebuildEqual()
}

// TestSlowWorkerIsFenced: a worker stops (SIGSTOP) while it holds an
// attempt, for longer than its lease. Its job is redelivered to another
// worker, which does not run it a second time; the controller declares the
// attempt lost and a new attempt runs. When the stopped worker resumes, it
// finds its claim superseded, stops its CLI and nothing it says counts:
// the task succeeds exactly once.
func TestSlowWorkerIsFenced(t *testing.T) {
	t.Parallel()
	c := startController(t, lease)
	frozen := c.startWorker("frozen", 1, lease)
	repo := newRepo(t)
	id := c.submit(slowFlow("fenced", repo, "6s"))
	a1 := drovertype.AttemptID(id, "slow", 1)
	c.running(id, a1)
	if err := syscall.Kill(frozen.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	other := c.startWorker("other", 1, lease)
	st := c.waitFlow(id, 60*time.Second, drovertype.FlowSucceeded)
	if err := syscall.Kill(frozen.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen.waitLog(30*time.Second, "claim superseded")

	var ok []*projection.Attempt
	for _, a := range st.Detail.Attempts {
		if a.State == drovertype.AttemptSucceeded {
			ok = append(ok, a)
		}
	}
	if len(ok) != 1 || ok[0].Worker != "other" || ok[0].ID == a1 {
		t.Fatalf("succeeded attempts %+v, want one new attempt on the other worker", ok)
	}
	if a := attemptOf(st, a1); a == nil || a.Error == nil || a.Error.Class != "WORKER_LOST" || a.Report != nil {
		t.Errorf("the stopped worker's attempt: %+v", a)
	}
	evs := c.events(id)
	for _, ev := range ofType(evs, event.AttemptClaimed, "") {
		if ev.Attempt == a1 && ev.Epoch != 1 {
			t.Errorf("attempt 1 was claimed again at epoch %d: run twice", ev.Epoch)
		}
	}
	// The job of attempt 1 came back to the other worker (its AckWait ran
	// out), which refused to run it: held by the stopped worker, or lost.
	waitFor(t, 30*time.Second, "the redelivered job to be refused", func() bool {
		for _, line := range strings.Split(readLog(other), "\n") {
			if strings.Contains(line, "attempt="+a1) &&
				(strings.Contains(line, "not running it again") || strings.Contains(line, "already finished")) {
				return true
			}
		}
		return false
	})
	if strings.Contains(readLog(other), a1+"-e") {
		t.Errorf("the other worker made a worktree for attempt 1")
	}
	// Whatever the resumed worker published afterwards is fenced off.
	c.waitQuiet(id)
	final := c.status(id)
	if n := len(ofType(c.events(id), event.AttemptReported, "")); n != 1 {
		t.Errorf("%d attempt_reported events, want 1: the resumed worker reported", n)
	}
	if final.Detail.Flow.State != drovertype.FlowSucceeded {
		t.Errorf("flow %s after the resumed worker", final.Detail.Flow.State)
	}
	c.rebuildEqual()
}

// waitQuiet waits until no event of the flow has been appended for a while:
// the processes that could still publish have had their say.
func (c *cluster) waitQuiet(id string) {
	c.t.Helper()
	last, since := -1, time.Now()
	waitFor(c.t, 30*time.Second, "the flow's log to settle", func() bool {
		n := len(c.events(id))
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 2*time.Second
	})
}

// TestWorkerDrain: SIGTERM stops a worker from claiming; a running attempt
// that ends within the drain timeout finishes there. One that does not is
// handed back when the drain ends and another worker takes it over at once,
// at the next epoch — not lost, not waiting out a lease.
func TestWorkerDrain(t *testing.T) {
	t.Parallel()
	c := startController(t)
	repo := newRepo(t)

	patient := c.startWorker("patient", 1, "DROVER_WORKER_DRAIN_TIMEOUT=1m")
	id := c.submit(`name: drain
repo: ` + repo + `
base: main
runtime: demo
tasks:
  - id: finish
    prompt: |
      @sleep 6s
      @write finish.txt done
`)
	// The CLI runs long enough to be seen running, and stopped while it
	// does, on a loaded machine too.
	c.running(id, drovertype.AttemptID(id, "finish", 1))
	_ = patient.cmd.Process.Signal(syscall.SIGTERM)
	patient.waitLog(10*time.Second, "draining")
	select {
	case <-patient.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the draining worker did not exit")
	}
	if patient.err != nil {
		t.Errorf("drained worker: %v", patient.err)
	}
	// The task is done; the flow's integration waits for a worker.
	st := c.status(id)
	if a := st.Detail.Attempts[0]; a.Worker != "patient" || a.Epoch != 1 || a.State != drovertype.AttemptSucceeded || len(st.Detail.Attempts) != 1 {
		t.Errorf("attempt %+v: want it finished by the draining worker", a)
	}
	first := id

	quitter := c.startWorker("quitter", 1, "DROVER_WORKER_DRAIN_TIMEOUT=500ms")
	id = c.submit(`name: handback
repo: ` + repo + `
base: main
runtime: demo
tasks:
  - id: long
    prompt: |
      @sleep 4s
      @write long.txt done
`)
	a1 := drovertype.AttemptID(id, "long", 1)
	pid := c.running(id, a1)
	_ = quitter.cmd.Process.Signal(syscall.SIGTERM)
	quitter.waitLog(10*time.Second, "drain timeout: handing running attempts back")
	<-quitter.done
	if !gone(pid) {
		t.Errorf("the handed-back attempt's CLI (pid %d) still runs", pid)
	}
	c.startWorker("taker", 1)
	c.waitFlow(first, 60*time.Second, drovertype.FlowSucceeded)
	st = c.waitFlow(id, 60*time.Second, drovertype.FlowSucceeded)
	if len(st.Detail.Attempts) != 1 {
		t.Fatalf("%d attempts, want the one handed back", len(st.Detail.Attempts))
	}
	if a := st.Detail.Attempts[0]; a.Worker != "taker" || a.Epoch != 2 || a.Error != nil {
		t.Errorf("attempt %+v: want it taken over at epoch 2", a)
	}
	if n := len(ofType(c.events(id), event.AttemptLost, "")); n != 0 {
		t.Errorf("a handed-back attempt was declared lost")
	}
	c.rebuildEqual()
}

// TestLowDiskStopsClaiming: a worker whose disk is below its free-space
// floor claims nothing and says so, in its log and in `controller workers`.
func TestLowDiskStopsClaiming(t *testing.T) {
	t.Parallel()
	c := startController(t)
	full := c.startWorker("full", 2, "DROVER_WORKER_MIN_FREE_DISK=1PiB")
	full.waitLog(30*time.Second, "not claiming attempts")
	waitFor(t, 30*time.Second, "the fleet to show why", func() bool {
		out, _, _ := c.cli("workers")
		return strings.Contains(out, "is below worker.min_free_disk 1.0 PiB")
	})
	repo := newRepo(t)
	id := c.submit(`name: disk
repo: ` + repo + `
base: main
runtime: demo
tasks:
  - {id: a, prompt: "@write a.txt a"}
  - {id: b, prompt: "@write b.txt b"}
`)
	c.startWorker("roomy", 1)
	st := c.waitFlow(id, 60*time.Second, drovertype.FlowSucceeded)
	for _, a := range st.Detail.Attempts {
		if a.Worker != "roomy" {
			t.Errorf("attempt %s ran on %s, the worker without disk space", a.ID, a.Worker)
		}
	}
}

// TestJetStreamClusterNodeKilled runs a flow on a three-node JetStream
// cluster with every stream at R3, and kills the node leading the events
// stream mid-flow: the flow completes with nothing lost.
func TestJetStreamClusterNodeKilled(t *testing.T) {
	t.Parallel()
	nodes := startNATSCluster(t, 3)
	url := clusterURL(nodes)
	c := startControllerOn(t, url, "DROVER_NATS_REPLICAS=3", lease)
	c.startWorker("worker-1", 2, lease)
	c.startWorker("worker-2", 2, lease)
	repo := newRepo(t)
	var tasks strings.Builder
	const n = 12
	for i := range n {
		fmt.Fprintf(&tasks, "  - {id: t%d, prompt: \"@sleep 400ms\\n@write t%d.txt %d\"}\n", i, i, i)
	}
	id := c.submit("name: cluster\nrepo: " + repo + "\nbase: main\nruntime: demo\nretry: {initial_backoff: 100ms}\ntasks:\n" + tasks.String())

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	waitFor(t, 60*time.Second, "a few attempts to report", func() bool {
		return countEvents(js, id, event.AttemptReported) >= 3
	})
	info, err := js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if r := info.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("events stream has %d replicas, want 3", r)
	}
	leader := info.CachedInfo().Cluster.Leader
	var victim *natsNode
	for _, node := range nodes {
		if node.name == leader {
			victim = node
		}
	}
	if victim == nil {
		t.Fatalf("no node named %q leads the events stream", leader)
	}
	victim.kill()
	t.Logf("killed %s, the events stream's leader", leader)

	st := c.waitFlow(id, 2*time.Minute, drovertype.FlowSucceeded)
	for _, task := range st.Detail.Tasks {
		if task.State != drovertype.TaskSucceeded {
			t.Errorf("task %s: %s", task.ID, task.State)
		}
	}
	if got := len(files(t, repo, "drover/"+id+"/integration")); got != n+1 {
		t.Errorf("integration branch has %d files, want %d", got, n+1)
	}
	c.rebuildEqual()
}

// countEvents counts the flow's events of one type in the EVENTS stream.
func countEvents(js jetstream.JetStream, flowID string, typ event.Type) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return -1
	}
	subj := queue.EventSubject(flowID, string(typ))
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return -1
	}
	return int(info.State.Subjects[subj])
}
