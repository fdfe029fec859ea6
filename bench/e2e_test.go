package bench

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// BenchmarkEndToEnd runs the same independent tasks through Drover and
// through the floor — the work nothing can avoid — side by side, and reports
// Drover's wall time as a multiple of the floor's.
//
// The repository has about 2,000 files (DROVER_BENCH_E2E_FILES). Each of the
// 200 tasks (DROVER_BENCH_E2E_TASKS) runs the claude CLI played by the demo
// agent (persona mode): it appends to three files of its own, replays a real
// Claude Code stream-json transcript and creates hello.txt.
//
//   - Drover: a controller (`controller serve`, embedded NATS, fsync on every
//     write) and 2 worker processes × 1 slot, each having cloned the repo
//     into its cache in a warm-up flow. Timed from the start of `controller
//     submit` to the arrival of the flow's flow_completed (drover_s): every
//     attempt run, observed, pushed and reported, then the integration branch
//     merged from the 200 results. drover_tasks_s stops at
//     integration_scheduled, the instant every task had ended.
//   - Floor: bench/floor.sh in 2 lanes: per task `git worktree add` from a
//     local bare clone, the same CLI command line with the same prompt,
//     `git add -A && git commit`, `git diff base..HEAD`. Nothing else.
//
// ratio = drover_s / floor_s (target ≤ 1.10); ratio_tasks =
// drover_tasks_s / floor_s. Consecutive runs alternate which side goes
// first; Drover's processes are stopped while the floor runs, and each side's
// files are deleted and synced before the other starts (settle). Also
// reported: the CPU time of every process of each side (cpu_ratio), the
// floor's time per task in a lane, and the phases of Drover's attempts from
// the times on their events (phaseMetrics).
func BenchmarkEndToEnd(b *testing.B) {
	skipShort(b)
	nFiles := envInt(b, "DROVER_BENCH_E2E_FILES", 2000)
	nTasks := envInt(b, "DROVER_BENCH_E2E_TASKS", 200)
	b.Run(fmt.Sprintf("tasks=%d_files=%d", nTasks, nFiles), func(b *testing.B) {
		template := bareRepo(b, func(dir string) error { return genRepo(dir, nFiles) })
		floorScript, err := filepath.Abs("floor.sh")
		if err != nil {
			b.Fatal(err)
		}
		prompts := make([]string, nTasks)
		for i := range prompts {
			prompts[i] = taskPrompt(i, nFiles)
		}
		var drover, floor e2eResult
		for i := 0; i < b.N; i++ {
			origin := copyRepo(b, template)
			runDrover := func() { drover.add(e2eDrover(b, origin, prompts)) }
			runFloor := func() { floor.add(e2eFloor(b, floorScript, origin, prompts)) }
			if nextRun("e2e")%2 == 0 {
				runDrover()
				runFloor()
			} else {
				runFloor()
				runDrover()
			}
		}
		n := float64(b.N)
		b.ReportMetric(drover.total.Seconds()/n, "drover_s")
		b.ReportMetric(drover.tasks.Seconds()/n, "drover_tasks_s")
		b.ReportMetric(floor.total.Seconds()/n, "floor_s")
		b.ReportMetric(drover.total.Seconds()/floor.total.Seconds(), "ratio")
		b.ReportMetric(drover.tasks.Seconds()/floor.total.Seconds(), "ratio_tasks")
		b.ReportMetric(drover.cpu.Seconds()/n, "drover_cpu_s")
		b.ReportMetric(floor.cpu.Seconds()/n, "floor_cpu_s")
		b.ReportMetric(drover.cpu.Seconds()/floor.cpu.Seconds(), "cpu_ratio")
		// Where Drover's time goes, per attempt, and the floor's per task.
		b.ReportMetric(ms(floor.total)*2/float64(nTasks)/n, "floor_task_ms")
		for _, name := range slices.Sorted(maps.Keys(drover.phases)) {
			b.ReportMetric(drover.phases[name]/n, name)
		}
	})
}

// claudeEnv makes the claude-code runtime run the demo agent as claude.
func claudeEnv() []string {
	return []string{
		"DROVER_WORKER_RUNTIMES=claude-code",
		"DROVER_RUNTIMES_CLAUDE_CODE_BINARY=" + filepath.Join(bin, "claude"),
		"DROVER_RUNTIMES_CLAUDE_CODE_ENV=DEMO_AGENT_TRANSCRIPTS=" + transcripts,
		// Confined (the default), the fake may read its transcripts.
		"DROVER_RUNTIMES_CLAUDE_CODE_SANDBOX_READ=" + transcripts,
		// claude refuses to skip permissions as root unless sandboxed.
		"IS_SANDBOX=1",
	}
}

// e2eResult is what one side of a run took: wall time to the end (and, for
// Drover, to the last task's end), CPU time of every process involved, and
// Drover's attempt phases.
type e2eResult struct {
	total, tasks, cpu time.Duration
	phases            map[string]float64
}

func (r *e2eResult) add(o e2eResult) {
	r.total += o.total
	r.tasks += o.tasks
	r.cpu += o.cpu
	if r.phases == nil {
		r.phases = map[string]float64{}
	}
	for k, v := range o.phases {
		r.phases[k] += v
	}
}

// e2eDrover runs the tasks as one flow through a fresh controller and two
// warmed-up workers.
func e2eDrover(b *testing.B, origin string, prompts []string) e2eResult {
	c := newCluster(b, claudeEnv()...)
	defer func() {
		c.stop()
		settle(b, c.dirs...)
	}()
	c.addWorker("w1", 1)
	c.addWorker("w2", 1)
	c.waitIdle("claude-code", 2, 20*time.Millisecond)
	// Warm-up: one task per worker (each sleeps, so neither takes both)
	// clones the repository into both caches, as a worker that has served
	// the repo before has it.
	warm := []string{"Warm up.\n@sleep 1s\n@case success", "Warm up.\n@sleep 1s\n@case success"}
	id, _ := c.submit(flowFile(b, "warmup", origin, warm))
	c.completed(id, 5*time.Minute)
	c.waitIdle("claude-code", 2, 20*time.Millisecond)

	file := flowFile(b, "e2e", origin, prompts)
	cpu0 := c.cpu()
	began := time.Now()
	id, _ = c.submit(file)
	profiled := c.profile("e2e")
	done := c.completed(id, 30*time.Minute)
	cpu := c.cpu() - cpu0
	profiled()
	ended := c.events.wait(id, event.IntegrationScheduled, time.Minute)
	evs := c.flowEvents(id)
	for _, why := range retried(evs) {
		b.Logf("retried: %s", why)
	}
	return e2eResult{total: done.at.Sub(began), tasks: ended.at.Sub(began), cpu: cpu, phases: phaseMetrics(evs)}
}

// e2eFloor runs floor.sh over a fresh bare clone of origin and checks every
// task's diff.
func e2eFloor(b *testing.B, script, origin string, prompts []string) e2eResult {
	dir := workDir(b)
	cache := filepath.Join(dir, "cache.git")
	git(b, dir, "clone", "-q", "--bare", origin, cache)
	promptDir := filepath.Join(dir, "prompts")
	for i, p := range prompts {
		writeFile(b, filepath.Join(promptDir, fmt.Sprint(i)), p)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", script, cache, "main", fmt.Sprint(len(prompts)), "2", promptDir, out, "--",
		"claude", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "-p")
	cmd.Env = append(baseEnv(), "IS_SANDBOX=1", "DEMO_AGENT_TRANSCRIPTS="+transcripts)
	began := time.Now()
	if outb, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("floor.sh: %v\n%s", err, tail(string(outb), 4000))
	}
	took := time.Since(began)
	// The script's rusage counts every process it waited for: xargs, the
	// lanes, git, the CLI.
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	defer settle(b, dir)
	for i := range prompts {
		diff, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i)+".diff"))
		if err != nil {
			b.Fatal(err)
		}
		if n := strings.Count(string(diff), "diff --git "); n != 4 {
			b.Fatalf("floor task %d changed %d files, want 4 (3 edited, 1 created):\n%s", i, n, tail(string(diff), 2000))
		}
	}
	return e2eResult{total: took, cpu: cpu}
}

// flowFile writes a flow of independent claude-code tasks with the default
// retry policy.
func flowFile(b *testing.B, name, repo string, prompts []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "name: %s\nrepo: %s\nbase: main\nruntime: claude-code\ntasks:\n", name, repo)
	for i, p := range prompts {
		fmt.Fprintf(&sb, "  - id: t%04d\n    prompt: |\n", i)
		for line := range strings.SplitSeq(p, "\n") {
			fmt.Fprintf(&sb, "      %s\n", line)
		}
	}
	return writeFile(b, filepath.Join(b.TempDir(), name+".yaml"), sb.String())
}

// taskPrompt is task i's prompt: three files of its own edited, then the
// recorded Claude Code success replayed, which creates hello.txt.
func taskPrompt(i, nFiles int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Task %d: tidy up three files and add a greeting.\n", i)
	for k := range 3 {
		fmt.Fprintf(&sb, "@append %s // reviewed by task %d\n", repoFile((3*i+k)%nFiles), i)
	}
	sb.WriteString("@case success")
	return sb.String()
}

// repoFile names the n-th file of the generated repository.
func repoFile(n int) string { return fmt.Sprintf("pkg/p%02d/file%02d.go", n/50, n%50) }

// genRepo writes n Go source files of 1–3 KB in packages of 50, and a README.
func genRepo(dir string, n int) error {
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# bench repo\n"), 0o644); err != nil {
		return err
	}
	for i := range n {
		p := filepath.Join(dir, repoFile(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "package p%02d\n\n// File %d of the benchmark repository.\n", i/50, i)
		for f := range 10 + i%20 {
			fmt.Fprintf(&sb, "\n// F%d_%d returns a value derived from its input.\nfunc F%d_%d(x int) int {\n\treturn x*%d + %d\n}\n",
				i, f, i, f, f+1, i)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
