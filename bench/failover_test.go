package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/leadertest"
	"github.com/drover-dev/drover/internal/natsconn"
)

// BenchmarkFailover measures how long the controllers go without a leader
// when the leader dies: three `controller serve` processes, each with a
// data dir of its own, on one nats-server (in the benchmark's process,
// fsync on every write), two workers × 2 slots, and a flow of small tasks
// with max_parallel 4, so that some task always waits for a slot and each
// attempt's end calls for a decision.
//
// DROVER_BENCH_FAILOVER_KILLS times (20), once the flow runs: the leader
// (the lease's holder) is killed with SIGKILL at t0; the benchmark reads
// the log from there to the next leader's election (elected) and to its
// first decision, an event stamped with the new epoch (failover); the
// killed controller is started again, as a standby, and the next kill
// waits a second. Times are the stream's timestamps of those events minus
// t0, at the default lease TTL (3s). Reported: failover_p50_s, failover_max_s
// (target ≤ 5 s), elected_p50_s, elected_max_s.
func BenchmarkFailover(b *testing.B) {
	skipShort(b)
	kills := envInt(b, "DROVER_BENCH_FAILOVER_KILLS", 20)
	b.Run(fmt.Sprintf("kills=%d", kills), func(b *testing.B) {
		var failovers, elections []time.Duration
		for range b.N {
			f, e := failoverRun(b, kills)
			failovers, elections = append(failovers, f...), append(elections, e...)
		}
		p50, most := leadertest.Percentiles(failovers)
		ep50, emost := leadertest.Percentiles(elections)
		b.ReportMetric(p50.Seconds(), "failover_p50_s")
		b.ReportMetric(most.Seconds(), "failover_max_s")
		b.ReportMetric(ep50.Seconds(), "elected_p50_s")
		b.ReportMetric(emost.Seconds(), "elected_max_s")
	})
}

// haController is one of the benchmark's controllers.
type haController struct {
	name, dir, id string
	p             *proc
}

func failoverRun(b *testing.B, kills int) (failovers, elections []time.Duration) {
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: b.TempDir(), Port: -1, SyncAlways: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	url := ns.ClientURL()
	ctls := make([]*haController, 3)
	for i := range ctls {
		ctls[i] = &haController{name: fmt.Sprintf("controller-%d", i+1), dir: b.TempDir()}
		startHA(b, ctls[i], url)
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"DROVER_WORKER_RUNTIMES=demo", "DROVER_WORKER_MIN_FREE_DISK=16MiB", "DROVER_WORKER_DRAIN_TIMEOUT=2s"}
	for _, w := range []string{"w1", "w2"} {
		start(b, w, env, "worker", "run", "--nats-url", url, "--id", w, "--work-dir", filepath.Join(workDir(b), w), "--slots", "2")
	}
	repo := bareRepo(b, func(dir string) error { return os.WriteFile(filepath.Join(dir, "README.md"), []byte("bench\n"), 0o644) })
	var y strings.Builder
	fmt.Fprintf(&y, "name: failover\nrepo: %s\nbase: main\nruntime: demo\nmax_parallel: 4\ntasks:\n", repo)
	for i := range 40 * kills {
		fmt.Fprintf(&y, "  - id: t%05d\n    prompt: |\n      @sleep 200ms\n      @write out/t%05d.txt x\n", i, i)
	}
	flowFile := writeFile(b, filepath.Join(b.TempDir(), "flow.yaml"), y.String())
	cmd := exec.Command(filepath.Join(bin, "controller"), "submit", flowFile, "--nats-url", url)
	cmd.Env = baseEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("submit: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for k := range kills {
		h := killLeaderHA(ctx, b, js, ctls, url)
		b.Logf("kill %d: %s", k+1, h)
		failovers, elections = append(failovers, h.Decided), append(elections, h.Elected)
		time.Sleep(time.Second)
	}
	return failovers, elections
}

// startHA starts a controller on url and waits until it serves.
func startHA(b *testing.B, c *haController, url string) {
	c.p = start(b, c.name, nil, "controller", "serve", "--data-dir", c.dir, "--nats-url", url)
	waitFor(b, time.Minute, c.name+" to serve", func() bool {
		c.p.checkAlive()
		log, _ := os.ReadFile(c.p.log)
		return strings.Contains(string(log), "controller serving")
	})
	id, err := os.ReadFile(filepath.Join(c.dir, "controller-id"))
	if err != nil {
		b.Fatal(err)
	}
	c.id = strings.TrimSpace(string(id))
}

// killLeaderHA kills the lease's holder and measures the handover, then
// starts it again.
func killLeaderHA(ctx context.Context, b *testing.B, js jetstream.JetStream, ctls []*haController, url string) leadertest.Handover {
	var leader *haController
	waitFor(b, time.Minute, "a leader", func() bool {
		h, _ := leadership.Holder(ctx, js)
		for _, c := range ctls {
			if c.id == h {
				leader = c
			}
		}
		return leader != nil
	})
	seq, epoch, err := leadertest.LastElection(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	_ = syscall.Kill(-leader.p.cmd.Process.Pid, syscall.SIGKILL)
	<-leader.p.done
	last, err := leadertest.StreamLast(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	h, err := leadertest.Measure(ctx, js, max(seq, last), epoch, t0, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	startHA(b, leader, url)
	return h
}
