package e2e

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestFleetSim runs the fleet simulator at a small size — 50 simulated
// workers (package worker's own code, their attempts simulated) and 2,000
// tasks in 20 flows, with failures, fatal failures and hanging runs the
// simulator cancels — against a controller of the harness, which is killed
// (SIGKILL) and restarted mid-run. It asserts correctness only: fleetsim
// exits 0 having found every task ended as its simulated runs dictated,
// no attempt run twice, no task merged twice, and the controller's
// projection equal to the fold of its log (the controller's rebuild, which
// fleetsim asks for). Its figures are benchmarks (make bench-fleet), not asserted.
func TestFleetSim(t *testing.T) {
	t.Parallel()
	// The controller as shipped, without the race detector, which would
	// take eight times its CPU; and without fsync on every write, which
	// costs most of the rest and guards against power loss, which this
	// test does not simulate.
	c := startControllerBin(t, controllerAsShipped(t), "DROVER_NATS_SYNC_INTERVAL=default")
	cmd := exec.Command(filepath.Join(bin, "fleetsim"), "--workers", "50", "--slots", "4", "--tasks", "2000", "--flows", "20",
		"--nats-url", c.url, "--data-dir", t.TempDir(), "--fail", "0.05", "--fatal", "0.01", "--hang", "0.005",
		"--duration-median", "20ms", "--duration-p99", "200ms", "--timeout", "5m", "--log-level", "warn", "--progress", "1s")
	cmd.Env = append(cleanEnv(), "GORACE=halt_on_error=1 exitcode=66", "DROVER_QUEUE_ACK_WAIT=10s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	progress := make(chan int, 64)
	var logs bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { followProgress(stderr, &logs, progress) })
	// Kill the controller once a quarter of the runs are done: the fleet
	// must lose nothing and double nothing across its restart.
	restarted := false
	for runs := range progress {
		if !restarted && runs >= 500 {
			c.restartController(true)
			restarted = true
		}
	}
	wg.Wait()
	err = cmd.Wait()
	t.Logf("fleetsim:\n%s", out.String())
	if err != nil {
		t.Fatalf("fleetsim: %v\n%s", err, tail(logs.String(), 6000))
	}
	if !restarted {
		t.Error("the flows completed before the controller could be killed")
	}
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndexByte(last, '\n')+1:]
	if !regexp.MustCompile(`^fleet: workers=50 tasks=2000 wall_s=\S+ controller_cpu_ms_per_task=\S+ claim_p99_ms=\S+ controller_rss_mb=\S+ lost=0 doubled=0$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(out.String(), "rebuild equal=true") {
		t.Error("the controller's rebuild was not equal")
	}
}

// followProgress copies fleetsim's stderr to logs and sends the run count
// of each progress line ("fleetsim: 5s: 693 runs, …", every second); it closes progress
// at the end of the output.
func followProgress(r interface{ Read([]byte) (int, error) }, logs *bytes.Buffer, progress chan<- int) {
	defer close(progress)
	re := regexp.MustCompile(`^fleetsim: \S+: (\d+) runs,`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		logs.WriteString(line + "\n")
		if m := re.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			progress <- n
		}
	}
}
