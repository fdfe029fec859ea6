package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// BenchmarkNativeEndToEnd measures native attempts through real worker
// processes against a model that answers at once: a test server on
// loopback speaking Anthropic's Messages API (internal/native/nativetest),
// scripted by each task's prompt. What an attempt then takes is Drover's
// own cost: the SDK's round trips, the event log and its live stream, the
// tools, and around them the lifecycle (worktree, observe, push, report).
//
//   - Turns: a worker with 1 slot runs 20 tasks (DROVER_BENCH_NATIVE_TASKS)
//     of 10 turns each — read a 20 KB file, write a file, list the
//     worktree, three times, then answer. turn_ms is the run's duration as
//     its report gives it (the loop from its first model call to its last
//     answer, in the worker) per turn, averaged over the attempts (target ≤
//     5 ms, as BenchmarkTurnOverhead measures in process); the attempts'
//     phases are reported too (phaseMetrics).
//   - Memory: a second worker, serving a second runtime on the same server,
//     holds 20 attempts at once (DROVER_BENCH_NATIVE_HELD), each waiting on
//     its third model call, which the server never answers.
//     rss_per_attempt_MB = (its VmRSS with them held − its VmRSS idle after
//     a warm-up) / attempts (target ≤ 5 MB). The flow is then cancelled.
func BenchmarkNativeEndToEnd(b *testing.B) {
	skipShort(b)
	nTasks := envInt(b, "DROVER_BENCH_NATIVE_TASKS", 20)
	nHeld := envInt(b, "DROVER_BENCH_NATIVE_HELD", 20)
	b.Run(fmt.Sprintf("tasks=%d_held=%d", nTasks, nHeld), func(b *testing.B) {
		src := strings.Repeat("func f() { println(\"some code here\") }\n", 500)
		repo := bareRepo(b, func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "big.go"), []byte(src), 0o644)
		})
		var hung atomic.Int64
		srv := nativetest.NewAnthropic(b, "bench-key-0123456789").RespondWith(func(t *nativetest.Turn) nativetest.Reply {
			r := nativetest.Directed(t)
			if r.Hang {
				hung.Add(1)
			}
			return r
		})
		var cfg strings.Builder
		cfg.WriteString("runtimes:\n")
		for _, name := range []string{"bench-native", "bench-held"} {
			fmt.Fprintf(&cfg, "  %s:\n    adapter: native\n    provider: anthropic\n    base_url: %s\n    api_key_env: BENCH_NATIVE_KEY\n    model: %s\n",
				name, srv.BaseURL(), srv.ModelID)
		}
		file := writeFile(b, filepath.Join(b.TempDir(), "drover.yaml"), cfg.String())
		c := newCluster(b, "DROVER_CONFIG="+file, "BENCH_NATIVE_KEY=bench-key-0123456789")
		defer c.stop()
		c.addWorker("w1", 1, "DROVER_WORKER_RUNTIMES=bench-native")
		w2 := c.addWorker("w2", nHeld, "DROVER_WORKER_RUNTIMES=bench-held")
		c.waitIdle("bench-native", 1, 20*time.Millisecond)
		c.waitIdle("bench-held", 1, 20*time.Millisecond)
		run := func(name, runtime string, n int, prompt string) string {
			prompts := make([]string, n)
			for i := range prompts {
				prompts[i] = fmt.Sprintf(prompt, i)
			}
			id, _ := c.submit(nativeFlow(b, name, runtime, repo, prompts))
			return id
		}
		const turns = 10
		work := "Work.\n" + strings.Repeat("@read big.go\n@write out/t%[1]04d.txt done\n@list\n", 3)
		hold := "Hold.\n@read big.go\n@list\n@hang\n@write never%04d.txt x"
		c.completed(run("warmup", "bench-native", 2, work), 5*time.Minute)
		c.completed(run("warmup-held", "bench-held", 2, work), 5*time.Minute)
		var turnMS, rssPer float64
		phases := map[string]float64{}
		for range b.N {
			c.waitIdle("bench-native", 1, 20*time.Millisecond)
			id := run("turns", "bench-native", nTasks, work)
			c.completed(id, 30*time.Minute)
			evs := c.flowEvents(id)
			turnMS += perTurn(b, evs, turns)
			for k, v := range phaseMetrics(evs) {
				phases[k] += v
			}

			c.waitIdle("bench-held", 1, 20*time.Millisecond)
			idle := w2.memory().RSS
			hung.Store(0)
			id = run("held", "bench-held", nHeld, hold)
			waitFor(b, 10*time.Minute, "every attempt to wait on its model", func() bool { return hung.Load() >= int64(nHeld) })
			rssPer += mb(w2.memory().RSS-idle) / float64(nHeld)
			c.cancel(id)
			c.events.wait(id, event.FlowCompleted, 5*time.Minute, c.ctrl, w2)
		}
		n := float64(b.N)
		b.ReportMetric(turnMS/n, "turn_ms")
		b.ReportMetric(rssPer/n, "rss_per_attempt_MB")
		for k, v := range phases {
			b.ReportMetric(v/n, k)
		}
	})
}

// cancel cancels a flow by the operator's command.
func (c *cluster) cancel(flowID string) {
	c.tb.Helper()
	cmd := exec.Command(filepath.Join(bin, "controller"), "cancel", flowID, "--reason", "bench", "--data-dir", c.dataDir)
	cmd.Env = baseEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.tb.Fatalf("controller cancel: %v\n%s", err, out)
	}
}

// perTurn is the mean, over a flow's attempts, of each run's duration
// (the report's, Run's own) per turn, in ms; every attempt must have taken
// turns turns.
func perTurn(b *testing.B, evs []*event.Event, turns int) float64 {
	var sum float64
	n := 0
	for _, ev := range evs {
		if ev.Type != event.AttemptReported {
			continue
		}
		var r event.Report
		if err := ev.Payload(&r); err != nil {
			b.Fatal(err)
		}
		if !r.Success || r.Turns != turns {
			b.Fatalf("attempt %s: success %v after %d turns, want %d: %+v", ev.Attempt, r.Success, r.Turns, turns, r.Error)
		}
		sum += float64(r.DurationMS) / float64(turns)
		n++
	}
	if n == 0 {
		b.Fatal("no attempt reported")
	}
	return sum / float64(n)
}

// nativeFlow writes a flow of independent tasks on a native runtime.
func nativeFlow(b *testing.B, name, runtime, repo string, prompts []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "name: %s\nrepo: %s\nbase: main\nruntime: %s\nretry: {max_attempts: 1}\ntasks:\n", name, repo, runtime)
	for i, p := range prompts {
		fmt.Fprintf(&sb, "  - id: t%04d\n    prompt: |\n", i)
		for line := range strings.SplitSeq(p, "\n") {
			fmt.Fprintf(&sb, "      %s\n", line)
		}
	}
	return writeFile(b, filepath.Join(b.TempDir(), name+".yaml"), sb.String())
}
