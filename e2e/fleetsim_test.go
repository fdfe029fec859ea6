package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	if !regexp.MustCompile(`^fleet: workers=50 tasks=2000 wall_s=\S+ controller_cpu_ms_per_task=\S+ claim_p99_ms=\S+ controller_rss_mb=\S+ lost=0 doubled=0 nats_cpu_ms_per_task=n/a$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(out.String(), "rebuild equal=true") {
		t.Error("the controller's rebuild was not equal")
	}
	// The workers told fleetsim their claims' times: every leg was
	// measured (a claim's write takes a round trip, never 0).
	for _, leg := range []string{"decided→stored", "stored→delivered", "delivered→claimed"} {
		m := regexp.MustCompile(`fleetsim: claim wait, ` + leg + `: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms`).FindStringSubmatch(out.String())
		if m == nil {
			t.Errorf("no claim wait line for %s", leg)
			continue
		}
		if p99, _ := strconv.ParseFloat(m[2], 64); p99 <= 0 {
			t.Errorf("claim wait, %s: p99 %s ms", leg, m[2])
		}
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

// TestFleetSimOwnServers runs the simulator as make bench-fleet does, with
// no URL: it starts a nats-server, a controller and a standby, each a
// process of its own, measures them, and stops them when it ends. Then it kills the
// nats-server under a running simulation: the simulator must say so and
// fail, not wait out its timeout, and leave no process behind.
func TestFleetSimOwnServers(t *testing.T) {
	t.Parallel()
	fleetsim := func(dir string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "fleetsim"), append([]string{"--workers", "4", "--slots", "2", "--data-dir", dir,
			"--nats-sync", "default", "--fail", "0", "--fatal", "0", "--hang", "0", "--log-level", "error", "--progress", "1s"}, args...)...)
		cmd.Env = cleanEnv()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		return cmd
	}

	dir := t.TempDir()
	out, err := fleetsim(dir, "--tasks", "40", "--duration-median", "10ms", "--duration-p99", "50ms", "--timeout", "2m", "--standbys", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("fleetsim: %v\n%s", err, tail(string(out), 4000))
	}
	if !regexp.MustCompile(`(?m)^fleet: workers=4 tasks=40 wall_s=\S+ controller_cpu_ms_per_task=[0-9.]+ claim_p99_ms=\S+ controller_rss_mb=[0-9.]+ lost=0 doubled=0 nats_cpu_ms_per_task=[0-9.]+$`).Match(out) {
		t.Errorf("no fleet: line measuring both processes:\n%s", out)
	}
	// The standby folded the same log, and said so once the flows were done.
	if !regexp.MustCompile(`(?m)^fleetsim: standby \S+ \(standby at the end\): CPU [0-9.]+ s, [0-9.]+ ms a task, RSS [1-9][0-9.]* MB; behind p50 \d+ events, max \d+ \(\d+ samples\); caught up [0-9.]+ s after the flows completed$`).Match(out) {
		t.Errorf("no line measuring the standby controller:\n%s", out)
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}

	// Its nats-server killed, or a standby, the simulator says so and
	// fails: its figures would be of another run.
	killUnder(t, fleetsim, "the nats-server", func(argv []string) bool { return argv[1] == "nats-server" })
	killUnder(t, fleetsim, "the standby controller", func(argv []string) bool {
		return argv[1] == "serve" && strings.Contains(strings.Join(argv, " "), "standby-1")
	}, "--standbys", "1")
}

// killUnder starts a simulation and, once the fleet runs, kills the
// process of it whose command line is says is what: the simulation must
// fail at once saying that what exited, and leave no process behind.
func killUnder(t *testing.T, fleetsim func(string, ...string) *exec.Cmd, what string, is func(argv []string) bool, args ...string) {
	t.Helper()
	dir := t.TempDir()
	run := &async{cmd: fleetsim(dir, append([]string{"--tasks", "400", "--duration-median", "2s", "--duration-p99", "4s", "--timeout", "5m"}, args...)...), done: make(chan struct{})}
	run.cmd.Stdout, run.cmd.Stderr = run, run
	if err := run.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		run.err = run.cmd.Wait()
		close(run.done)
	}()
	var victim int
	waitFor(t, 2*time.Minute, what+" and a first run", func() bool {
		for _, pid := range processesUnder(dir) {
			if is(cmdline(pid)) {
				victim = pid
			}
		}
		return victim != 0 && regexp.MustCompile(`fleetsim: \S+: [1-9]\d* runs`).MatchString(run.out())
	})
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.done:
		if run.err == nil || !strings.Contains(run.out(), what+" exited") {
			t.Errorf("fleetsim ended with %v, not saying %s exited:\n%s", run.err, what, tail(run.out(), 4000))
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("fleetsim still runs 90 s after %s was killed:\n%s", what, tail(run.out(), 4000))
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}

// processesUnder lists the processes whose command line names dir.
func processesUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		for _, arg := range cmdline(pid) {
			if strings.HasPrefix(arg, dir) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// cmdline is a process's argv, with at least two entries.
func cmdline(pid int) []string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return append(strings.Split(string(b), "\x00"), "", "")
}
