package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOutputFlood measures what a CLI printing 100 MB
// (DROVER_BENCH_FLOOD_BYTES) costs the worker's memory: one worker process
// (1 slot, demo runtime) runs one task whose demo agent prints `@flood`
// lines as fast as it can, then exits 0.
//
// Before the task — after a warm-up task has cloned the repo and run the
// CLI once — the worker's VmRSS is read and its VmHWM reset to it
// (/proc/PID/clear_refs); when the flow has completed, VmHWM is the peak.
// rss_growth_MB = peak − baseline (target ≤ 64 MB); also reported: the
// baseline and the peak, and flood_s, submit to flow_completed. The CLI's own
// memory is its process's, not the worker's.
func BenchmarkOutputFlood(b *testing.B) {
	skipShort(b)
	size := envInt(b, "DROVER_BENCH_FLOOD_BYTES", 100<<20)
	b.Run(fmt.Sprintf("MB=%d", size>>20), func(b *testing.B) {
		repo := bareRepo(b, func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "README.md"), []byte("# flood\n"), 0o644)
		})
		c := newCluster(b, "DROVER_WORKER_RUNTIMES=demo")
		defer c.stop()
		w := c.addWorker("w1", 1)
		c.waitIdle("demo", 1, 20*time.Millisecond)
		run := func(name, prompt string) time.Duration {
			file := writeFile(b, filepath.Join(b.TempDir(), "flow.yaml"), fmt.Sprintf(
				"name: %s\nrepo: %s\nbase: main\nruntime: demo\nretry: {max_attempts: 1}\ntasks:\n  - id: t\n    prompt: %q\n",
				name, repo, prompt))
			began := time.Now()
			id, _ := c.submit(file)
			done := c.completed(id, 10*time.Minute)
			return done.at.Sub(began)
		}
		run("warmup", "@write warm.txt warm")
		c.waitIdle("demo", 1, 20*time.Millisecond)

		var growth, base, peak int64
		var took time.Duration
		for range b.N {
			m := w.memory()
			w.resetPeak()
			took += run("flood", fmt.Sprintf("@flood %d", size))
			after := w.memory()
			if g := after.Peak - m.RSS; g > growth {
				growth, base, peak = g, m.RSS, after.Peak
			}
			c.waitIdle("demo", 1, 20*time.Millisecond)
		}
		b.ReportMetric(mb(growth), "rss_growth_MB")
		b.ReportMetric(mb(base), "base_rss_MB")
		b.ReportMetric(mb(peak), "peak_rss_MB")
		b.ReportMetric(took.Seconds()/float64(b.N), "flood_s")
	})
}
