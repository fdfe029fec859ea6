package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// maintainRemote packs the refs of a bare repository every interval until
// the returned stop is called, as git hosts do on their own. A bare
// repository that is only pushed to keeps one file per ref, and every push
// to it (and every fetch from it) reads them all: with the branch Drover
// pushes per attempt, a 10,000-task flow would otherwise measure how the
// file system lists 10,000 files per push (0.4 s at 2,800 refs, against
// 0.05 s packed), not Drover.
func maintainRemote(b *testing.B, repo string, every time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if out, err := exec.Command("git", "--git-dir="+repo, "pack-refs", "--all").CombinedOutput(); err != nil {
					b.Logf("pack-refs %s: %v\n%s", repo, err, out)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// BenchmarkScale runs a flow of N independent tasks (DROVER_BENCH_SCALE_TASKS,
// 10,000 by default) and one of N/10, side by side, each through a fresh
// controller (`controller serve`, embedded NATS, fsync on every write) and 2
// worker processes × 2 slots. The fake CLI exits at once (`@exit 0`), so
// what is measured is Drover's own work per task and per flow.
//
// For each flow: submit_s, the `controller submit` command (parse, validate,
// resolve, record flow_submitted); total_s, from the start of submit to the
// arrival of flow_completed (every attempt run and reported, then the
// integration branch built); and the controller process's peak RSS (VmHWM,
// which includes its embedded nats-server). ratio = total_s(N) /
// total_s(N/10) (target ≤ 11), peak_rss_MB is the big flow's (target
// ≤ 256 MB). ctrl_cpu_s is the controller process's CPU time over the flow
// (10× for 10× the tasks if its work per task is constant), retries the
// attempts beyond each task's first (default retry policy). The big flow
// goes first; a flow the controller refuses skips the benchmark at once,
// with the controller's error. `make bench` runs 1,000 vs 100 tasks and
// `make bench-scale` the specified 10,000 vs 1,000.
func BenchmarkScale(b *testing.B) {
	skipShort(b)
	big := envInt(b, "DROVER_BENCH_SCALE_TASKS", 10000)
	small := max(big/10, 1)
	b.Run(fmt.Sprintf("tasks=%d_vs_%d", big, small), func(b *testing.B) {
		repo := bareRepo(b, func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "README.md"), []byte("# scale\n"), 0o644)
		})
		var bigRun, smallRun scaleResult
		for range b.N {
			for _, n := range []int{big, small} {
				r := scaleFlow(b, repo, n)
				if n == big {
					bigRun.add(r)
				} else {
					smallRun.add(r)
				}
			}
		}
		n := float64(b.N)
		b.ReportMetric(bigRun.submit.Seconds()/n, "submit_s")
		b.ReportMetric(bigRun.total.Seconds()/n, "total_s")
		b.ReportMetric(mb(bigRun.peak), "peak_rss_MB")
		b.ReportMetric(smallRun.submit.Seconds()/n, "small_submit_s")
		b.ReportMetric(smallRun.total.Seconds()/n, "small_total_s")
		b.ReportMetric(mb(smallRun.peak), "small_peak_rss_MB")
		b.ReportMetric(bigRun.total.Seconds()/smallRun.total.Seconds(), "ratio")
		b.ReportMetric(bigRun.ctrlCPU.Seconds()/n, "ctrl_cpu_s")
		b.ReportMetric(smallRun.ctrlCPU.Seconds()/n, "small_ctrl_cpu_s")
		b.ReportMetric(float64(bigRun.retries+smallRun.retries)/n, "retries")
	})
}

type scaleResult struct {
	submit, total, ctrlCPU time.Duration
	peak                   int64 // the highest of the runs
	retries                int
}

func (r *scaleResult) add(o scaleResult) {
	r.submit += o.submit
	r.total += o.total
	r.ctrlCPU += o.ctrlCPU
	r.peak = max(r.peak, o.peak)
	r.retries += o.retries
}

// scaleFlow runs one flow of n `@exit 0` tasks on a fresh cluster.
func scaleFlow(b *testing.B, repo string, n int) scaleResult {
	// Each flow pushes to a remote of its own, which is kept the way a git
	// host keeps one (see maintainRemote).
	repo = copyRepo(b, repo)
	defer maintainRemote(b, repo, 5*time.Second)()
	c := newCluster(b, "DROVER_WORKER_RUNTIMES=demo")
	defer c.stop()
	c.addWorker("w1", 2)
	c.addWorker("w2", 2)
	c.waitIdle("demo", 2, 20*time.Millisecond)
	var sb strings.Builder
	fmt.Fprintf(&sb, "name: scale\nrepo: %s\nbase: main\nruntime: demo\ntasks:\n", repo)
	for i := range n {
		fmt.Fprintf(&sb, "  - id: t%05d\n    prompt: \"@exit 0\"\n", i)
	}
	file := writeFile(b, filepath.Join(b.TempDir(), "scale.yaml"), sb.String())
	cpu0 := c.ctrl.cpu()
	began := time.Now()
	id, submit, err := c.trySubmit(file)
	if err != nil {
		b.Skipf("the %d-task flow cannot run: %v", n, err)
	}
	profiled := c.profile(fmt.Sprintf("scale%d", n))
	done := c.completed(id, time.Duration(n)*time.Second+10*time.Minute)
	r := scaleResult{submit: submit, total: done.at.Sub(began), ctrlCPU: c.ctrl.cpu() - cpu0, peak: c.ctrl.memory().Peak,
		retries: c.count(id, event.AttemptScheduled) - n}
	profiled()
	c.heapProfile(fmt.Sprintf("scale%d", n))
	return r
}
