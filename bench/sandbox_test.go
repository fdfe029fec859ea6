package bench

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// BenchmarkSandbox measures what the sandbox adds to an attempt. One flow
// of the end-to-end scenario's tasks (BenchmarkEndToEnd: a 2,000-file
// repository, the claude CLI played by the demo agent) runs on two workers
// of one slot side by side, one with the sandbox on (every CLI confined: a
// policy compiled, a Landlock ruleset, the re-exec step) and one with
// worker.sandbox off, so both see the same machine at the same moments —
// on a shared machine, runs minutes apart differ by more than what is
// measured. Each attempt's phases (phaseMetrics) are reported for each
// worker (…_on, …_off); attempt_delta_ms is what the sandbox adds to an
// attempt, from claim to report (target ≤ 5), and cli_delta_ms the part
// in the CLI's phase. Wall times stretch with the machine's load (a
// process start is CPU work waiting its turn); cpu_per_attempt_ms_on/off,
// each worker's CPU time and its children's (git, the step, the CLI) over
// the flow per attempt, and cpu_delta_ms do not. The agent's own repository (the checkout's .git,
// package worktree) is made on both: docs/benchmarks.md compares it with
// the figures from before it.
//
// DROVER_BENCH_SANDBOX_TASKS (200) and DROVER_BENCH_E2E_FILES (2000) size it.
func BenchmarkSandbox(b *testing.B) {
	skipShort(b)
	nFiles := envInt(b, "DROVER_BENCH_E2E_FILES", 2000)
	nTasks := envInt(b, "DROVER_BENCH_SANDBOX_TASKS", 200)
	b.Run(fmt.Sprintf("tasks=%d_files=%d", nTasks, nFiles), func(b *testing.B) {
		template := bareRepo(b, func(dir string) error { return genRepo(dir, nFiles) })
		prompts := make([]string, nTasks)
		for i := range prompts {
			prompts[i] = taskPrompt(i, nFiles)
		}
		on, off := map[string]float64{}, map[string]float64{}
		var attempts [2]int
		var cpu [2]time.Duration
		for i := 0; i < b.N; i++ {
			evs, onCPU, offCPU := sandboxSideBySide(b, copyRepo(b, template), prompts)
			cpu[0] += onCPU
			cpu[1] += offCPU
			for k, side := range []map[string]float64{on, off} {
				part, n := byWorker(evs, []string{"on", "off"}[k])
				attempts[k] += n
				for name, v := range phaseMetrics(part) {
					side[name] += v
				}
			}
		}
		n := float64(b.N)
		for _, name := range slices.Sorted(maps.Keys(on)) {
			b.ReportMetric(on[name]/n, name+"_on")
			b.ReportMetric(off[name]/n, name+"_off")
		}
		b.ReportMetric(float64(attempts[0])/n, "attempts_on")
		b.ReportMetric(float64(attempts[1])/n, "attempts_off")
		b.ReportMetric((on["attempt_ms"]-off["attempt_ms"])/n, "attempt_delta_ms")
		b.ReportMetric((on["cli_ms"]-off["cli_ms"])/n, "cli_delta_ms")
		onCPU, offCPU := ms(cpu[0])/float64(attempts[0]), ms(cpu[1])/float64(attempts[1])
		b.ReportMetric(onCPU, "cpu_per_attempt_ms_on")
		b.ReportMetric(offCPU, "cpu_per_attempt_ms_off")
		b.ReportMetric(onCPU-offCPU, "cpu_delta_ms")
	})
}

// sandboxSideBySide runs the tasks as one flow on a worker with the
// sandbox on and one with it off, both warmed up, and returns the flow's
// events and each worker's CPU time (its children's included) over it.
func sandboxSideBySide(b *testing.B, origin string, prompts []string) (evs []*event.Event, onCPU, offCPU time.Duration) {
	c := newCluster(b, claudeEnv()...)
	defer func() {
		c.stop()
		settle(b, c.dirs...)
	}()
	won := c.addWorker("on", 1, "DROVER_WORKER_SANDBOX=on")
	woff := c.addWorker("off", 1, "DROVER_WORKER_SANDBOX=off")
	c.waitIdle("claude-code", 2, 20*time.Millisecond)
	warm := []string{"Warm up.\n@sleep 1s\n@case success", "Warm up.\n@sleep 1s\n@case success"}
	id, _ := c.submit(flowFile(b, "warmup", origin, warm))
	c.completed(id, 5*time.Minute)
	c.waitIdle("claude-code", 2, 20*time.Millisecond)
	on0, off0 := won.cpu(), woff.cpu()
	id, _ = c.submit(flowFile(b, "sandbox", origin, prompts))
	c.completed(id, 30*time.Minute)
	return c.flowEvents(id), won.cpu() - on0, woff.cpu() - off0
}

// byWorker keeps the events of the attempts a worker claimed, and counts
// those attempts.
func byWorker(evs []*event.Event, worker string) ([]*event.Event, int) {
	mine := map[string]bool{}
	for _, ev := range evs {
		var d event.AttemptClaimedData
		if ev.Type == event.AttemptClaimed && ev.Payload(&d) == nil && d.Worker == worker {
			mine[ev.Attempt] = true
		}
	}
	var out []*event.Event
	for _, ev := range evs {
		if mine[ev.Attempt] {
			out = append(out, ev)
		}
	}
	return out, len(mine)
}
