package bench

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// BenchmarkSandbox runs the end-to-end scenario's tasks (BenchmarkEndToEnd:
// a 2,000-file repository, the claude CLI played by the demo agent) through
// Drover twice, with the sandbox on (every CLI confined: a Landlock ruleset
// per attempt, the re-exec step) and with worker.sandbox off, side by side,
// alternating which goes first. It reports both walls (on_s, off_s, ratio)
// and each phase of an attempt both ways (…_on, …_off); attempt_delta_ms is
// what the sandbox adds to an attempt, from claim to report (target ≤ 5),
// and cli_delta_ms the part of it in the CLI's phase (ruleset, step, exec).
// The agent's own repository (the checkout's .git, package worktree) is
// made whether the sandbox is on or not: docs/benchmarks.md compares it
// with the figures from before it.
//
// DROVER_BENCH_SANDBOX_TASKS (100) and DROVER_BENCH_E2E_FILES (2000) size it.
func BenchmarkSandbox(b *testing.B) {
	skipShort(b)
	nFiles := envInt(b, "DROVER_BENCH_E2E_FILES", 2000)
	nTasks := envInt(b, "DROVER_BENCH_SANDBOX_TASKS", 100)
	b.Run(fmt.Sprintf("tasks=%d_files=%d", nTasks, nFiles), func(b *testing.B) {
		template := bareRepo(b, func(dir string) error { return genRepo(dir, nFiles) })
		prompts := make([]string, nTasks)
		for i := range prompts {
			prompts[i] = taskPrompt(i, nFiles)
		}
		var on, off e2eResult
		for i := 0; i < b.N; i++ {
			origin := copyRepo(b, template)
			runOn := func() { on.add(e2eDrover(b, origin, prompts, "DROVER_WORKER_SANDBOX=on")) }
			runOff := func() { off.add(e2eDrover(b, origin, prompts, "DROVER_WORKER_SANDBOX=off")) }
			if nextRun("sandbox")%2 == 0 {
				runOn()
				runOff()
			} else {
				runOff()
				runOn()
			}
		}
		n := float64(b.N)
		b.ReportMetric(on.total.Seconds()/n, "on_s")
		b.ReportMetric(off.total.Seconds()/n, "off_s")
		b.ReportMetric(on.total.Seconds()/off.total.Seconds(), "ratio")
		b.ReportMetric(on.cpu.Seconds()/n, "on_cpu_s")
		b.ReportMetric(off.cpu.Seconds()/n, "off_cpu_s")
		for _, name := range slices.Sorted(maps.Keys(on.phases)) {
			b.ReportMetric(on.phases[name]/n, name+"_on")
			b.ReportMetric(off.phases[name]/n, name+"_off")
		}
		b.ReportMetric((on.phases["attempt_ms"]-off.phases["attempt_ms"])/n, "attempt_delta_ms")
		b.ReportMetric((on.phases["cli_ms"]-off.phases["cli_ms"])/n, "cli_delta_ms")
	})
}
