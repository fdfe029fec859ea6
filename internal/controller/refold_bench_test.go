package controller

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/flow"
)

// BenchmarkRefold measures a controller's startup on the log of large
// finished flows: DROVER_BENCH_REFOLD_TASKS tasks (10,000 by default;
// 100,000 is issue 29's size, about 1.2 million events), in flows of
// flow.MaxTasks, run as a fleet of 1,000 workers × 4 slots runs them,
// 4,000 attempts at once,
// each writing the events fleetsim's simulated runtime writes (claim,
// initialize, prepare, start, exit, two changed files, the diff, the
// checkpoint, terminate and a report with a 2 KiB output tail): 12 events
// a task with its decision, interleaved one step at a time across the
// attempts in flight.
//
//   - refold: the controller's fold loop, as it starts on an empty data
//     dir (a new standby, a lost disk, `controller rebuild`), from the
//     first sequence until it has applied the last: events/s, refold_s,
//     and the process's CPU time per event (cpu_us/event).
//   - open: the store it wrote closed and opened again, as a controller
//     restarting on its data dir loads it (open_s), and the heap the
//     projection holds then (heap_mb, after a collection).
//
// Publishing the stream is not timed.
func BenchmarkRefold(b *testing.B) {
	tasks := benchEnvInt(b, "DROVER_BENCH_REFOLD_TASKS", 10_000)
	b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) { benchRefold(b, tasks) })
}

// refoldInFlight is how many attempts run at once in BenchmarkRefold's
// flow: 1,000 workers of 4 slots.
const refoldInFlight = 4000

func benchRefold(b *testing.B, tasks int) {
	js, cfg := benchNATS(b)
	transcript, err := os.ReadFile("../../testdata/transcripts/claude/success/stdout.txt")
	if err != nil {
		b.Fatal(err)
	}
	g := &eventGen{b: b, js: js, cfg: cfg, stdout: cutLines(string(transcript), 2<<10), at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	flows := g.fleetFlows(tasks, refoldInFlight)
	last := g.published()

	var refold, cpu, open time.Duration
	var heap uint64
	b.ResetTimer()
	for range b.N {
		dir := b.TempDir()
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		began := processCPU(b)
		refold += foldStore(b, cfg, js, st, last)
		cpu += processCPU(b) - began
		checkRefolded(b, st, flows, tasks)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		opened := time.Now()
		if st, err = store.Open(dir, store.Options{}); err != nil {
			b.Fatal(err)
		}
		open += time.Since(opened)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap += ms.HeapAlloc
		checkRefolded(b, st, flows, tasks)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(last)*n/refold.Seconds(), "events/s")
	b.ReportMetric(refold.Seconds()/n, "refold_s")
	// CPU time of the whole process (the embedded server's delivery
	// included) per event: a busy machine stretches the rate, less this.
	b.ReportMetric(float64(cpu.Microseconds())/(float64(last)*n), "cpu_us/event")
	b.ReportMetric(open.Seconds()/n, "open_s")
	b.ReportMetric(float64(heap)/n/(1<<20), "heap_mb")
	b.ReportMetric(float64(last)/float64(tasks), "events/task")
}

// checkRefolded fails the benchmark unless every task of the flows
// succeeded, as the stream says, and nothing was poison.
func checkRefolded(b *testing.B, st *store.Store, flows []string, tasks int) {
	st.Read(func(s *projection.State) {
		done := 0
		for _, id := range flows {
			if f := s.Flows[id]; f != nil {
				for _, t := range s.FlowTasks(f) {
					if t.State == drovertype.TaskSucceeded {
						done++
					}
				}
			}
		}
		if done != tasks || len(s.Poisons) > 0 {
			b.Fatalf("refold: %d of %d tasks succeeded, %d poison events", done, tasks, len(s.Poisons))
		}
	})
}

// cutLines returns s's first whole lines within n bytes.
func cutLines(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i > 0 {
		return s[:i+1]
	}
	return s[:n]
}

// fleetFlows writes the events of flows of n independent tasks in all
// (flow.MaxTasks a flow at most), as a fleet runs them: inFlight attempts
// at once, each a step further in turn, a task scheduled whenever one
// ends; each flow is recorded as the controller records it (flowEvents:
// a large one in parts). Every attempt succeeds on its first run. It
// returns the flows' ids.
func (g *eventGen) fleetFlows(n, inFlight int) []string {
	type task struct{ flow, id string }
	var flows []string
	var queue []task
	for first := 0; first < n; first += flow.MaxTasks {
		id := fmt.Sprintf("refold%d-abcdef", len(flows))
		flows = append(flows, id)
		var y strings.Builder
		fmt.Fprintf(&y, "name: refold\nrepo: https://git.example.com/team/service.git\nbase: main\nruntime: claude-code\ntasks:\n")
		for i := first; i < min(first+flow.MaxTasks, n); i++ {
			fmt.Fprintf(&y, "  - id: t%06d\n    prompt: Task %d, tidy up two files.\n", i, i)
			queue = append(queue, task{id, fmt.Sprintf("t%06d", i)})
		}
		evs, err := flowEvents(id, g.at, g.accept("refold.yaml", y.String()))
		if err != nil {
			g.b.Fatal(err)
		}
		for _, ev := range evs {
			g.emitEvent(ev)
		}
	}
	var running [][]func()
	for len(queue) > 0 || len(running) > 0 {
		for len(running) < inFlight && len(queue) > 0 {
			running = append(running, g.fleetAttempt(queue[0].flow, queue[0].id))
			queue = queue[1:]
		}
		kept := running[:0]
		for _, steps := range running {
			steps[0]()
			if len(steps) > 1 {
				kept = append(kept, steps[1:])
			}
		}
		running = kept
	}
	return flows
}

// fleetAttempt returns the steps of one attempt of task as fleetsim's
// simulated runtime runs it, its decision first.
func (g *eventGen) fleetAttempt(flowID, task string) []func() {
	id := drovertype.AttemptID(flowID, task, 1)
	branch := drovertype.AttemptBranch(flowID, task, 1)
	worker := fmt.Sprintf("w%04d", len(task)*31%1000)
	files := []string{"sim/" + task + "/file0.go", "sim/" + task + "/file1.go"}
	stat := " 2 files changed, 6 insertions(+)"
	commit := sha("commit " + id)
	phase := func(typ event.Type, data any) func() {
		return func() { g.emit(fmt.Sprintf("%s:%s:1", typ, id), typ, flowID, task, id, 1, data) }
	}
	file := func(path string) func() {
		return func() {
			g.emit(fmt.Sprintf("%s:%s:1:%s", event.FileModified, id, sha(path)[:16]), event.FileModified,
				flowID, task, id, 1, event.FileModifiedData{Path: path, Change: "modified"})
		}
	}
	sandbox := "off: simulated runtime, no process"
	return []func(){
		func() {
			g.emit("attempt_scheduled:"+id, event.AttemptScheduled, flowID, task, id, 0, event.AttemptScheduledData{
				N: 1, Runtime: "claude-code", Pool: "default", Branch: branch, Timeout: flow.Duration(30 * time.Minute)})
		},
		phase(event.AttemptClaimed, event.AttemptClaimedData{Worker: worker, Host: "fleetsim"}),
		phase(event.AdapterInitialized, event.AdapterInitializedData{Adapter: "fleetsim", Binary: "claude-code", Version: "simulated"}),
		phase(event.PrepareCompleted, event.PrepareCompletedData{Worktree: "/fleetsim/worktrees/" + id + "-e1", Branch: branch,
			BaseCommit: sha("base " + flowID), Baseline: sha("baseline " + id)}),
		phase(event.RuntimeStarted, event.RuntimeStartedData{Argv: []string{"fleetsim", "--task", task}, Sandbox: sandbox}),
		phase(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited", DurationMS: 1200}),
		file(files[0]),
		file(files[1]),
		phase(event.DiffComputed, event.DiffComputedData{Modified: files, Stat: stat, DiffBytes: 240}),
		phase(event.CheckpointCommitCreated, event.CheckpointCommitCreatedData{Commit: commit}),
		phase(event.RuntimeTerminated, struct{}{}),
		phase(event.AttemptReported, &event.Report{
			Success: true, DurationMS: 1200, StdoutTail: g.stdout, FilesModified: files, DiffSummary: stat,
			Branch: branch, Commit: commit, Sandbox: sandbox,
			Usage:     &event.Usage{Model: "fleetsim", InputTokens: new(int64(4048)), OutputTokens: new(int64(712)), CostUSD: new(0.0123)},
			LogObject: id + "/e1/output.log", LogBytes: int64(len(g.stdout)), PatchObject: id + "/e1/diff.patch",
		}),
	}
}
