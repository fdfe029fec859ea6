package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/leadertest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chaosPlan sizes a chaos run.
type chaosPlan struct {
	tasks, workers, slots                   int
	workerKills, controllerKills, natsKills int
	timeout                                 time.Duration
	// controllers: with one, a controller kill is followed by its restart
	// on the same data dir; with more, it kills the leader, a standby
	// takes over, and the killed one comes back as a standby.
	controllers int
	// maxParallel bounds the flow's attempts at once (0: none): the
	// workers' slots then always leave a task waiting, whose start the
	// leader of the day decides as soon as an attempt ends, so that a
	// failover's first decision comes with its election.
	maxParallel int
}

// The full runs are `make e2e`'s (DROVER_CHAOS=full); `make test` runs the
// short ones.
var (
	chaosFull  = chaosPlan{tasks: 300, workers: 3, slots: 2, workerKills: 50, controllerKills: 10, natsKills: 2, timeout: 10 * time.Minute, controllers: 1}
	chaosShort = chaosPlan{tasks: 40, workers: 3, slots: 2, workerKills: 8, controllerKills: 2, natsKills: 1, timeout: 4 * time.Minute, controllers: 1}
	// The leader-kill mode: three controllers, the leader killed.
	chaosLeadersFull  = chaosPlan{tasks: 300, workers: 3, slots: 2, workerKills: 50, controllerKills: 10, natsKills: 2, timeout: 12 * time.Minute, controllers: 3, maxParallel: 6}
	chaosLeadersShort = chaosPlan{tasks: 30, workers: 2, slots: 2, workerKills: 3, controllerKills: 2, natsKills: 1, timeout: 4 * time.Minute, controllers: 3, maxParallel: 4}
)

// chaosLease is the claim lease of the chaos run: long enough that a worker
// slowed by the race detector on a loaded machine still renews in time,
// short enough that lost attempts come back quickly.
const chaosLease = "DROVER_QUEUE_ACK_WAIT=3s"

// TestChaos runs one flow of many small tasks through a controller, three
// workers and a nats-server process while a driver kills workers (SIGKILL,
// then a new worker on the same work dir), the controller (SIGKILL, then a
// restart on the same data dir) and NATS (SIGKILL, then a restart on the same
// store). The schedule comes from a seed, printed, that DROVER_CHAOS_SEED
// replays. At the end every task has the outcome its fake CLI dictates, each
// success was recorded once, no CLI process is left, and a rebuild of the
// projection from the log equals the live one.
func TestChaos(t *testing.T) {
	t.Parallel()
	plan := chaosShort
	if os.Getenv("DROVER_CHAOS") == "full" {
		plan = chaosFull
	}
	runChaos(t, plan)
}

// TestChaosLeaders is TestChaos with three controllers, each on a data dir
// of its own, and the leader killed (SIGKILL) instead: a standby takes
// over, the killed one comes back as a standby. Besides TestChaos's
// checks, nothing is doubled across leaders (no attempt runs at two
// epochs, no task is merged twice into the integration branch), every
// survivor's projection equals a rebuild, and each failover's time is
// reported: from the kill to the new leader's election and to its first
// decision.
func TestChaosLeaders(t *testing.T) {
	t.Parallel()
	plan := chaosLeadersShort
	if os.Getenv("DROVER_CHAOS") == "full" {
		plan = chaosLeadersFull
	}
	runChaos(t, plan)
}

func runChaos(t *testing.T, plan chaosPlan) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DROVER_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("DROVER_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("chaos seed %d (replay with DROVER_CHAOS_SEED=%d): %d tasks, %d workers × %d slots, %d worker kills, %d controller kills (of %d), %d NATS restarts",
		seed, seed, plan.tasks, plan.workers, plan.slots, plan.workerKills, plan.controllerKills, plan.controllers, plan.natsKills)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	ns := startNATS(t)
	g := startGroup(t, ns.url(), plan.controllers, chaosLease)
	c := g.members[0]
	var handovers []leadertest.Handover
	workDirs := make([]string, plan.workers)
	workers := make([]*proc, plan.workers)
	var allWorkers []*proc
	gen := 0
	startWorker := func(i int) {
		gen++
		workers[i] = c.startWorkerIn(fmt.Sprintf("w%d-%d", i+1, gen), workDirs[i], plan.slots, chaosLease)
		allWorkers = append(allWorkers, workers[i])
	}
	for i := range plan.workers {
		workDirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("w%d", i+1))
		startWorker(i)
	}

	repo := newRepo(t)
	flowYAML, want := chaosFlow(repo, plan.tasks, plan.maxParallel, rng)
	id := c.submit(flowYAML)

	nc, err := nats.Connect(ns.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	// The schedule: every fault in a seeded order, each due once the flow
	// has made a share of its progress, so all of them land mid-flow.
	var faults []string
	for range plan.workerKills {
		faults = append(faults, "worker")
	}
	for range plan.controllerKills {
		faults = append(faults, "controller")
	}
	for range plan.natsKills {
		faults = append(faults, "nats")
	}
	rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	done := map[string]int{}
	progress := 0
	deadline := time.Now().Add(plan.timeout)
	for i, fault := range faults {
		due := (i + 1) * plan.tasks * 7 / 10 / (len(faults) + 1)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("chaos: fault %d of %d not reached in %s (progress %d, due at %d)", i+1, len(faults), plan.timeout, progress, due)
			}
			if n := countEvents(js, id, event.AttemptReported); n > progress {
				progress = n
			}
			if progress >= due {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		switch fault {
		case "worker":
			w := rng.IntN(plan.workers)
			workers[w].kill()
			startWorker(w)
		case "controller":
			if plan.controllers > 1 {
				h := g.killLeader()
				t.Logf("leader kill %d: %s", len(handovers)+1, h)
				handovers = append(handovers, h)
				break
			}
			_ = syscall.Kill(-c.ctrl.cmd.Process.Pid, syscall.SIGKILL)
			<-c.ctrl.done
			c.startCtrl("")
		case "nats":
			ns.restart()
		}
		done[fault]++
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
	}

	st := c.waitFlow(id, time.Until(deadline), drovertype.FlowFailed)

	// Every task ended as its fake CLI dictates.
	tasks := map[string]*projection.Task{}
	for _, task := range st.Detail.Tasks {
		tasks[task.ID] = task
		if task.State != want[task.ID] {
			t.Errorf("task %s: %s, want %s (%+v)", task.ID, task.State, want[task.ID], task.Error)
		}
	}
	// Each success recorded exactly once: one succeeded attempt per
	// succeeded task, its result pushed, and no successful report of an
	// attempt's claim in the log twice.
	succeeded := map[string][]*projection.Attempt{}
	lostRetried, fenced := 0, 0
	for _, a := range st.Detail.Attempts {
		fenced += a.Fenced
		if a.State == drovertype.AttemptSucceeded {
			succeeded[a.Task] = append(succeeded[a.Task], a)
		}
		if a.Error != nil && a.Error.Class == "WORKER_LOST" {
			lostRetried++
		}
	}
	for name, task := range tasks {
		n := len(succeeded[name])
		if (task.State == drovertype.TaskSucceeded) != (n == 1) || n > 1 {
			t.Errorf("task %s (%s) has %d succeeded attempts", name, task.State, n)
		}
	}
	evs := c.events(id)
	reports := map[string]int{}
	for _, ev := range ofType(evs, event.AttemptReported, "") {
		reports[fmt.Sprintf("%s@%d", ev.Attempt, ev.Epoch)]++
	}
	for claim, n := range reports {
		if n > 1 {
			t.Errorf("claim %s reported %d times", claim, n)
		}
	}
	branches := strings.Fields(git(t, repo, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/drover/"+id+"/"))
	for name, task := range tasks {
		if task.State == drovertype.TaskSucceeded && !slices.Contains(branches, task.ResultBranch) {
			t.Errorf("task %s: result branch %s not pushed", name, task.ResultBranch)
		}
	}
	checkRunOnce(t, evs)
	checkMergedOnce(t, repo, id)
	// No CLI of the flow survives its worker.
	if left := cliProcesses(id); len(left) > 0 {
		t.Errorf("CLI processes of the flow still running: %v", left)
	}
	g.rebuildEveryone()
	if len(handovers) > 0 {
		p50, most := summarize(handovers)
		t.Logf("chaos seed %d: %d leader kills, from the kill to the new leader's first decision: p50 %s, max %s",
			seed, len(handovers), p50.Round(time.Millisecond), most.Round(time.Millisecond))
	}

	redeliveries, rejected := 0, 0
	for _, w := range allWorkers {
		l := readLog(w)
		redeliveries += strings.Count(l, "job redelivered")
		rejected += strings.Count(l, "not running it again") + strings.Count(l, "acking duplicate job")
	}
	t.Logf("chaos seed %d: %d tasks (%d succeeded) in %d attempts; kills: %d workers, %d controller, %d NATS; "+
		"redeliveries %d, lost attempts retried %d (attempt_lost events %d), duplicate deliveries rejected %d, fenced events %d",
		seed, len(tasks), len(succeeded), len(st.Detail.Attempts), done["worker"], done["controller"], done["nats"],
		redeliveries, lostRetried, len(ofType(evs, event.AttemptLost, "")), rejected, fenced)
	if lostRetried == 0 {
		t.Errorf("no attempt was lost: the worker kills missed every attempt")
	}
}

// chaosFlow writes a flow of n small tasks and what each must end as. Every
// tenth task fails on purpose (exit 3, not retried); every fifth depends on
// the one before it, so a failure blocks it. Retries cover what the faults
// cause: lost workers, and prepares that raced a killed worker's git.
func chaosFlow(repo string, n, maxParallel int, rng *rand.Rand) (string, map[string]drovertype.TaskState) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: chaos\nrepo: %s\nbase: main\nruntime: demo\n", repo)
	if maxParallel > 0 {
		fmt.Fprintf(&b, "max_parallel: %d\n", maxParallel)
	}
	b.WriteString("retry: {max_attempts: 40, initial_backoff: 100ms, max_backoff: 1s, " +
		"retry_on: [WORKER_LOST, PREPARE_FAILED, OBSERVE_FAILED, RUNTIME_CONNECTION_FAILED, RUNTIME_CRASHED]}\ntasks:\n")
	want := map[string]drovertype.TaskState{}
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		fmt.Fprintf(&b, "  - id: %s\n", id)
		want[id] = drovertype.TaskSucceeded
		if i%5 == 4 {
			dep := fmt.Sprintf("t%03d", i-1)
			fmt.Fprintf(&b, "    depends_on: [%s]\n", dep)
			if want[dep] != drovertype.TaskSucceeded {
				want[id] = drovertype.TaskBlocked
			}
		}
		fmt.Fprintf(&b, "    prompt: |\n      @sleep %dms\n", 100+rng.IntN(600))
		if i%10 == 3 {
			b.WriteString("      @stderr failing on purpose\n      @exit 3\n")
			want[id] = drovertype.TaskFailed
			continue
		}
		fmt.Fprintf(&b, "      @write out/%s.txt %s\n", id, id)
	}
	return b.String(), want
}

// cliProcesses lists the processes whose environment names the flow: the
// CLIs Drover started for it (git and the workers themselves have no such
// variable).
func cliProcesses(flowID string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	marker := []byte("DROVER_FLOW_ID=" + flowID + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || gone(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env), string(marker)) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}

// checkRunOnce: no attempt ran at two claims' epochs. A decision queues an
// attempt once; whatever failed over, restarted or redelivered around it,
// at most one worker started its CLI.
func checkRunOnce(t *testing.T, evs []*event.Event) {
	t.Helper()
	epochs := map[string]map[uint64]bool{}
	for _, ev := range ofType(evs, event.RuntimeStarted, "") {
		if epochs[ev.Attempt] == nil {
			epochs[ev.Attempt] = map[uint64]bool{}
		}
		epochs[ev.Attempt][ev.Epoch] = true
	}
	for att, es := range epochs {
		if len(es) > 1 {
			t.Errorf("attempt %s ran at %d epochs: %v", att, len(es), es)
		}
	}
}

// checkMergedOnce: no task's result is merged twice into the flow's
// integration branch.
func checkMergedOnce(t *testing.T, repo, flowID string) {
	t.Helper()
	branch := drovertype.IntegrationBranch(flowID, 1)
	subjects := strings.Split(git(t, repo, "log", "--merges", "--format=%s", branch), "\n")
	merged := map[string]int{}
	for _, s := range subjects {
		if !strings.HasSuffix(s, " into "+branch) {
			continue
		}
		from, _, _ := strings.Cut(strings.TrimPrefix(s, "Merge "), " ")
		task, _, ok := drovertype.ParseAttemptBranch(flowID, from)
		if !ok {
			t.Errorf("the integration branch merges %q", s)
			continue
		}
		merged[task]++
	}
	if len(merged) == 0 {
		t.Errorf("the integration branch %s merges nothing", branch)
	}
	for task, n := range merged {
		if n > 1 {
			t.Errorf("task %s merged %d times into the integration branch", task, n)
		}
	}
}
