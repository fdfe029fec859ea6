package bench

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
)

// bin holds the binaries built once for the package: controller, worker,
// demo-agent, and a `claude` symlink to the demo agent (persona mode).
var bin string

// transcripts is the recorded CLI runs the personas replay.
var transcripts string

func TestMain(m *testing.M) {
	flag.Parse()
	// Build only for a benchmark run: `make test` compiles this package and
	// must not pay for binaries it never starts.
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" || testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if transcripts, err = filepath.Abs("../testdata/transcripts"); err != nil {
		panic(err)
	}
	// scripts/bench.sh builds them once for all its `go test` runs.
	if dir := os.Getenv("DROVER_BENCH_BIN"); dir != "" {
		bin = dir
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "drover-bench-bin-")
	if err != nil {
		panic(err)
	}
	if err := buildBinaries(dir); err != nil {
		fmt.Println("bench:", err)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries builds controller, worker and demo-agent into dir, without
// the race detector, and links dir/claude to the demo agent.
func buildBinaries(dir string) error {
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/controller", "../cmd/worker", "../cmd/demo-agent")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build binaries: %w", err)
	}
	return os.Symlink(filepath.Join(dir, "demo-agent"), filepath.Join(dir, "claude"))
}

// skipShort skips a process benchmark under -short.
func skipShort(b *testing.B) {
	b.Helper()
	if testing.Short() {
		b.Skip("starts real processes; skipped in -short mode")
	}
}

// envInt reads a size from the environment, for scaling a scenario down
// while developing.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// workDir returns a fresh directory for repositories, worktrees and repo
// caches: under DROVER_BENCH_WORKDIR when set (say /dev/shm, to take a slow
// disk's file creation out of both sides of a comparison), else the test's
// temp dir. The controller's data dir (JetStream, Pebble) stays in TMPDIR
// either way, so fsync costs what it costs.
func workDir(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("DROVER_BENCH_WORKDIR")
	if base == "" {
		return tb.TempDir()
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "drover-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// runs counts the iterations of each scenario in this process, so that
// consecutive runs alternate which side goes first.
var (
	runsMu sync.Mutex
	runs   = map[string]int{}
)

func nextRun(scenario string) int {
	runsMu.Lock()
	defer runsMu.Unlock()
	n := runs[scenario]
	runs[scenario]++
	return n
}

// proc is a started process whose output goes to a log file.
type proc struct {
	tb   testing.TB
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func start(tb testing.TB, name string, env []string, args ...string) *proc {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(baseEnv(), env...)
	if lvl := os.Getenv("DROVER_BENCH_LOG_LEVEL"); lvl != "" {
		cmd.Env = append(cmd.Env, "DROVER_LOG_LEVEL="+lvl)
	}
	if extra := os.Getenv("DROVER_BENCH_ENV"); extra != "" {
		cmd.Env = append(cmd.Env, strings.Split(extra, ",")...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{tb: tb, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.stop()
		switch {
		case tb.Failed():
			b, _ := os.ReadFile(logPath)
			tb.Logf("---- %s log (whole: %s) ----\n%s", name, keepLog(logPath), tail(string(b), 4000))
		case os.Getenv("DROVER_BENCH_KEEP_LOGS") != "":
			tb.Logf("%s log: %s", name, keepLog(logPath))
		}
	})
	return p
}

// keepLog copies a failed run's log out of the temp dirs the benchmark
// removes, and returns where.
func keepLog(path string) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("drover-bench-logs-%d", os.Getpid()))
	dst := filepath.Join(dir, fmt.Sprintf("%s-%d", filepath.Base(path), time.Now().UnixNano()))
	b, err := os.ReadFile(path)
	if err == nil {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
	}
	if err != nil {
		return "not kept: " + err.Error()
	}
	return dst
}

// stop sends SIGTERM, then SIGKILL to the group if it lingers.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// checkAlive fails the benchmark if the process has ended.
func (p *proc) checkAlive() {
	p.tb.Helper()
	select {
	case <-p.done:
		b, _ := os.ReadFile(p.log)
		p.tb.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(string(b), 4000))
	default:
	}
}

// memory is a process's resident set, from /proc/PID/status, in bytes.
type memory struct {
	RSS  int64 // VmRSS: now
	Peak int64 // VmHWM: the highest since start or the last resetPeak
}

func (p *proc) memory() memory {
	p.tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.tb.Fatalf("%s: read status: %v", p.name, err)
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.RSS = kb << 10
		case "VmHWM:":
			m.Peak = kb << 10
		}
	}
	return m
}

// resetPeak sets the process's VmHWM back to its current RSS (Linux
// clear_refs), so that a later peak is the peak of what came after.
func (p *proc) resetPeak() {
	p.tb.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		p.tb.Fatalf("%s: reset peak RSS: %v", p.name, err)
	}
}

// cpu is the CPU time the process and the children it waited for (git,
// the CLI) have used: utime+stime+cutime+cstime from /proc/PID/stat.
func (p *proc) cpu() time.Duration {
	p.tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		p.tb.Fatalf("%s: read stat: %v", p.name, err)
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // fields 14–17, counted from field 3
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on Linux.
const clockTicks = 100

// baseEnv is the benchmark's environment without anything that configures
// Drover by accident (DROVER_*, OTEL_*), with the built binaries first in
// PATH and a fixed git identity for the floor's commits.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DROVER_") || strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "PATH=") ||
			strings.HasPrefix(kv, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
}

// profileEnv serves pprof from every Drover process when
// DROVER_BENCH_PPROF names a directory for the profiles (see profile).
func profileEnv() []string {
	if os.Getenv("DROVER_BENCH_PPROF") == "" {
		return nil
	}
	return []string{"DROVER_HTTP_LISTEN=127.0.0.1:0", "DROVER_HTTP_PPROF=true"}
}

// profile takes a CPU profile of every process of the cluster for
// DROVER_BENCH_PPROF_SECONDS (default 20) into the DROVER_BENCH_PPROF
// directory, named after the scenario, in the background; the returned func
// waits for the profiles. Without DROVER_BENCH_PPROF it does nothing. The
// processes then also serve metrics, which costs a little: profile runs are
// for finding what limits a scenario, not for its figures.
func (c *cluster) profile(scenario string) func() {
	dir := os.Getenv("DROVER_BENCH_PPROF")
	if dir == "" {
		return func() {}
	}
	secs := 20
	if s, err := strconv.Atoi(os.Getenv("DROVER_BENCH_PPROF_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	var wg sync.WaitGroup
	for _, p := range append([]*proc{c.ctrl}, c.workers...) {
		addr := ""
		waitFor(c.tb, 30*time.Second, p.name+" to serve pprof", func() bool {
			b, _ := os.ReadFile(p.log)
			if _, rest, ok := bytes.Cut(b, []byte(`msg="serving metrics and health" addr=`)); ok {
				addr = string(bytes.Fields(rest)[0])
				return true
			}
			return false
		})
		out := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", scenario, p.name, time.Now().UnixNano()))
		wg.Go(func() {
			if err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), out); err != nil {
				c.tb.Logf("profile %s: %v", p.name, err)
				return
			}
			c.tb.Logf("CPU profile of %s: %s", p.name, out)
		})
	}
	return wg.Wait
}

// heapProfile saves the controller's heap profile into the DROVER_BENCH_PPROF
// directory, if set: what its memory holds at the end of a scenario.
func (c *cluster) heapProfile(scenario string) {
	dir := os.Getenv("DROVER_BENCH_PPROF")
	if dir == "" {
		return
	}
	b, _ := os.ReadFile(c.ctrl.log)
	_, rest, ok := bytes.Cut(b, []byte(`msg="serving metrics and health" addr=`))
	if !ok {
		c.tb.Logf("heap profile: the controller serves no pprof")
		return
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-controller-heap-%d.pprof", scenario, time.Now().UnixNano()))
	if err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/heap", bytes.Fields(rest)[0]), out); err != nil {
		c.tb.Logf("heap profile: %v", err)
		return
	}
	c.tb.Logf("heap profile of the controller: %s", out)
}

func fetchProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cluster is a controller (`controller serve`, embedded NATS with its
// default fsync on every write) and worker processes, with a NATS client
// for the benchmark to watch events and claims.
type cluster struct {
	tb      testing.TB
	dataDir string
	env     []string
	ctrl    *proc
	workers []*proc
	url     string
	dirs    []string // the workers' work dirs
	nc      *nats.Conn
	js      jetstream.JetStream
	events  *eventWatch
}

// newCluster starts a controller; env configures it and every worker.
func newCluster(tb testing.TB, env ...string) *cluster {
	tb.Helper()
	env = append(profileEnv(), env...)
	c := &cluster{tb: tb, dataDir: tb.TempDir(), env: env}
	c.ctrl = start(tb, "controller", env, "controller", "serve", "--data-dir", c.dataDir, "--nats-listen", "127.0.0.1:-1")
	urlFile := filepath.Join(c.dataDir, "nats.url")
	waitFor(tb, 60*time.Second, "the controller to write nats.url", func() bool {
		c.ctrl.checkAlive()
		b, err := os.ReadFile(urlFile)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			c.url = strings.TrimSpace(string(b))
			return true
		}
		return false
	})
	nc, err := nats.Connect(c.url, nats.Name("drover-bench"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		tb.Fatal(err)
	}
	c.events = watchEvents(tb, nc)
	return c
}

// addWorker starts a worker process with its own work dir.
func (c *cluster) addWorker(name string, slots int, env ...string) *proc {
	c.tb.Helper()
	env = append(append([]string{"DROVER_WORKER_MIN_FREE_DISK=16MiB", "DROVER_WORKER_DRAIN_TIMEOUT=2s"}, c.env...), env...)
	dir := filepath.Join(workDir(c.tb), name)
	c.dirs = append(c.dirs, dir)
	w := start(c.tb, name, env, "worker", "run", "--nats-url", c.url, "--id", name,
		"--work-dir", dir, "--slots", strconv.Itoa(slots))
	c.workers = append(c.workers, w)
	return w
}

// waitIdle waits until n fetches wait on runtime's job consumer and no job
// is being worked on: the workers are up, have a free slot and listen for
// jobs. It polls the consumer's info every poll.
func (c *cluster) waitIdle(runtime string, n int, poll time.Duration) {
	c.tb.Helper()
	name := queue.AttemptConsumerName("default", runtime)
	waitForEvery(c.tb, 60*time.Second, poll, fmt.Sprintf("%d idle workers for %s", n, runtime), func() bool {
		for _, w := range c.workers {
			w.checkAlive()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err := c.js.Consumer(ctx, queue.AttemptsStream, name)
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting >= n && info.NumAckPending == 0
	})
}

// stop stops the workers, then the controller.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, w := range c.workers {
		wg.Go(w.stop)
	}
	wg.Wait()
	c.nc.Close()
	c.ctrl.stop()
}

// settle removes what one side of a comparison left on disk and waits for
// the filesystem to write it out (sync), so that the next side does not pay
// for it: on a filesystem mounted with discard, say, deleting 400,000 files
// makes every file created in the next minute slower.
func settle(tb testing.TB, dirs ...string) {
	tb.Helper()
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			tb.Logf("settle: %v", err) // the temp dir's cleanup tries again
		}
	}
	syscall.Sync()
}

// submit runs `controller submit` and returns the flow id and how long the
// command took.
func (c *cluster) submit(flowFile string) (string, time.Duration) {
	c.tb.Helper()
	id, took, err := c.trySubmit(flowFile)
	if err != nil {
		c.tb.Fatal(err)
	}
	return id, took
}

// trySubmit is submit that returns the command's failure.
func (c *cluster) trySubmit(flowFile string) (string, time.Duration, error) {
	began := time.Now()
	cmd := exec.Command(filepath.Join(bin, "controller"), "submit", flowFile, "--data-dir", c.dataDir)
	cmd.Env = baseEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	took := time.Since(began)
	if err != nil {
		return "", took, fmt.Errorf("controller submit: %w: %s%s", err, out.String(), strings.TrimSpace(errb.String()))
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "submitted flow "); ok {
			return strings.Fields(rest)[0], took, nil
		}
	}
	return "", took, fmt.Errorf("controller submit: no flow id in its output:\n%s", out.String())
}

// eventWatch records when the benchmark first saw each (flow, type) event,
// on its own monotonic clock, from a core NATS subscription to the events'
// subjects (JetStream delivers each stored message to them too).
type eventWatch struct {
	tb   testing.TB
	mu   sync.Mutex
	seen map[string]arrival
	kick chan struct{}
}

type arrival struct {
	at time.Time
	ev *event.Event
}

// watched are the event types the benchmarks wait for.
var watched = []event.Type{event.IntegrationScheduled, event.FlowCompleted}

func watchEvents(tb testing.TB, nc *nats.Conn) *eventWatch {
	tb.Helper()
	w := &eventWatch{tb: tb, seen: map[string]arrival{}, kick: make(chan struct{}, 1)}
	for _, typ := range watched {
		sub, err := nc.Subscribe(queue.EventSubject("*", string(typ)), func(m *nats.Msg) {
			at := time.Now()
			ev, err := event.Decode(m.Data)
			if err != nil {
				return
			}
			w.mu.Lock()
			key := ev.Flow + "/" + string(ev.Type)
			if _, ok := w.seen[key]; !ok {
				w.seen[key] = arrival{at: at, ev: ev}
			}
			w.mu.Unlock()
			select {
			case w.kick <- struct{}{}:
			default:
			}
		})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return w
}

// wait returns the first typ event of flowID, failing after timeout or when
// one of procs exits.
func (w *eventWatch) wait(flowID string, typ event.Type, timeout time.Duration, procs ...*proc) arrival {
	w.tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.mu.Lock()
		a, ok := w.seen[flowID+"/"+string(typ)]
		w.mu.Unlock()
		if ok {
			return a
		}
		select {
		case <-w.kick:
		case <-tick.C:
			for _, p := range procs {
				p.checkAlive()
			}
		case <-deadline.C:
			w.tb.Fatalf("no %s event for flow %s within %s", typ, flowID, timeout)
		}
	}
}

// cpu is the CPU time the controller, the workers and their CLIs and git
// commands have used so far.
func (c *cluster) cpu() time.Duration {
	d := c.ctrl.cpu()
	for _, w := range c.workers {
		d += w.cpu()
	}
	return d
}

// count returns how many typ events of the flow the EVENTS stream holds.
func (c *cluster) count(flowID string, typ event.Type) int {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		c.tb.Fatal(err)
	}
	subj := queue.EventSubject(flowID, string(typ))
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		c.tb.Fatal(err)
	}
	return int(info.State.Subjects[subj])
}

// flowEvents reads the flow's events from the EVENTS stream, in order.
func (c *cluster) flowEvents(flowID string) []*event.Event {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := c.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.FlowEventsFilter(flowID)},
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	var evs []*event.Event
	for {
		batch, err := cons.Fetch(1024, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			c.tb.Fatal(err)
		}
		n := 0
		pending := uint64(0)
		for msg := range batch.Messages() {
			n++
			ev, err := event.Decode(msg.Data())
			if err != nil {
				c.tb.Fatal(err)
			}
			evs = append(evs, ev)
			if md, err := msg.Metadata(); err == nil {
				pending = md.NumPending
			}
		}
		if n == 0 || pending == 0 {
			return evs
		}
	}
}

// completed waits for the flow's completion and checks it succeeded.
func (c *cluster) completed(flowID string, timeout time.Duration) arrival {
	c.tb.Helper()
	a := c.events.wait(flowID, event.FlowCompleted, timeout, append([]*proc{c.ctrl}, c.workers...)...)
	var d event.FlowCompletedData
	if err := a.ev.Payload(&d); err != nil {
		c.tb.Fatal(err)
	}
	if d.State != drovertype.FlowSucceeded {
		c.tb.Fatalf("flow %s completed %s, want succeeded", flowID, d.State)
	}
	return a
}

func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	waitForEvery(tb, timeout, 20*time.Millisecond, what, cond)
}

func waitForEvery(tb testing.TB, timeout, poll time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(poll)
	}
}

// git runs git in dir with the benchmark's identity and no user config.
func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = baseEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// bareRepo makes a bare repository whose main branch holds what fill
// writes into a fresh directory, in one commit.
func bareRepo(tb testing.TB, fill func(dir string) error) string {
	tb.Helper()
	root := workDir(tb)
	seed := filepath.Join(root, "seed")
	git(tb, root, "init", "-q", seed)
	if err := fill(seed); err != nil {
		tb.Fatal(err)
	}
	git(tb, seed, "add", "-A")
	git(tb, seed, "commit", "-q", "-m", "initial")
	bare := filepath.Join(root, "repo.git")
	git(tb, root, "init", "-q", "--bare", bare)
	git(tb, seed, "push", "-q", bare, "HEAD:refs/heads/main")
	if err := os.RemoveAll(seed); err != nil {
		tb.Fatal(err)
	}
	return bare
}

// copyRepo copies a bare repository, so each run starts from the same
// remote with none of the branches an earlier run pushed.
func copyRepo(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(workDir(tb), "origin.git")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		tb.Fatalf("copy %s: %v\n%s", src, err, out)
	}
	return dst
}

func writeFile(tb testing.TB, path, body string) string {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// mb converts bytes to MiB for a metric.
func mb(n int64) float64 { return float64(n) / (1 << 20) }

// phaseMetrics are the mean durations, in ms, of the phases of a flow's
// attempts, from the times the workers stamped on their events (one host,
// one clock): claimed → prepared (prepare_ms), → the CLI exited (cli_ms),
// → the diff computed (observe_ms), → the checkpoint committed and pushed
// (push_ms), → reported (report_ms: terminate, artifacts, worktree
// removed); attempt_ms is claimed → reported, and gap_ms the time a worker
// takes from one report to its next claim, negative when it claimed the
// next before the last reported (the last finishing outside its slot:
// docs/design.md, one attempt, step 3). retries counts the attempts
// beyond each task's first (a worker lost on an overloaded machine, say).
func phaseMetrics(evs []*event.Event) map[string]float64 {
	type attempt struct {
		worker string
		at     map[event.Type]time.Time
	}
	attempts := map[string]*attempt{}
	var order []string
	for _, ev := range evs {
		if ev.Attempt == "" || ev.Epoch == 0 {
			continue
		}
		a := attempts[ev.Attempt]
		if a == nil {
			a = &attempt{at: map[event.Type]time.Time{}}
			attempts[ev.Attempt] = a
			order = append(order, ev.Attempt)
		}
		a.at[ev.Type] = ev.Time
		if ev.Type == event.AttemptClaimed {
			var d event.AttemptClaimedData
			if ev.Payload(&d) == nil {
				a.worker = d.Worker
			}
		}
	}
	chain := []struct {
		name     string
		from, to event.Type
	}{
		{"prepare_ms", event.AttemptClaimed, event.PrepareCompleted},
		{"cli_ms", event.PrepareCompleted, event.RuntimeExited},
		{"observe_ms", event.RuntimeExited, event.DiffComputed},
		{"push_ms", event.DiffComputed, event.CheckpointCommitCreated},
		{"report_ms", event.CheckpointCommitCreated, event.AttemptReported},
		{"attempt_ms", event.AttemptClaimed, event.AttemptReported},
	}
	sums := map[string]time.Duration{}
	counts := map[string]int{}
	type span struct{ claimed, reported time.Time }
	byWorker := map[string][]span{}
	for _, id := range order {
		a := attempts[id]
		for _, c := range chain {
			from, ok1 := a.at[c.from]
			to, ok2 := a.at[c.to]
			if ok1 && ok2 {
				sums[c.name] += to.Sub(from)
				counts[c.name]++
			}
		}
		if c, ok := a.at[event.AttemptClaimed]; ok {
			if r, ok := a.at[event.AttemptReported]; ok {
				byWorker[a.worker] = append(byWorker[a.worker], span{c, r})
			}
		}
	}
	for _, spans := range byWorker {
		slices.SortFunc(spans, func(x, y span) int { return x.claimed.Compare(y.claimed) })
		for i := 1; i < len(spans); i++ {
			sums["gap_ms"] += spans[i].claimed.Sub(spans[i-1].reported)
			counts["gap_ms"]++
		}
	}
	out := map[string]float64{}
	for name, d := range sums {
		out[name] = ms(d) / float64(counts[name])
	}
	// Attempts beyond the first of each task: a retry costs a backoff and
	// makes the run slower than it should be; it must show.
	tasks, scheduled := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		if ev.Type == event.AttemptScheduled {
			scheduled[ev.Attempt] = true
			tasks[ev.Task] = true
		}
	}
	out["retries"] = float64(len(scheduled) - len(tasks))
	return out
}

// retried says how each attempt that a later one of its task followed
// ended: its report's class and message, or the controller's event that
// ended it (attempt_lost: its claim lapsed); and which attempt's decision
// was stored twice. A retry costs the run a backoff; this is where to
// start looking.
func retried(evs []*event.Event) []string {
	last := map[string]string{} // task -> its latest attempt
	reports := map[string]string{}
	seen := map[string][]string{} // attempt -> its events' types
	var out []string
	for _, ev := range evs {
		if ev.Attempt != "" {
			seen[ev.Attempt] = append(seen[ev.Attempt], string(ev.Type))
		}
		switch ev.Type {
		case event.AttemptScheduled:
			if last[ev.Task] == ev.Attempt {
				out = append(out, ev.Attempt+": its attempt_scheduled stored twice")
				continue
			}
			if prev, ok := last[ev.Task]; ok {
				why, ok := reports[prev]
				if !ok {
					why = "no report; its events: " + strings.Join(seen[prev], ", ")
				}
				out = append(out, prev+": "+why)
			}
			last[ev.Task] = ev.Attempt
		case event.AttemptReported:
			var r event.Report
			if ev.Payload(&r) == nil && r.Error != nil {
				reports[ev.Attempt] = fmt.Sprintf("%s: %s", r.Error.Class, r.Error.Message)
			} else {
				reports[ev.Attempt] = "reported without an error"
			}
		case event.AttemptLost, event.AttemptAbandoned, event.AttemptWithdrawn, event.AttemptUnplaced:
			if _, ok := reports[ev.Attempt]; !ok {
				reports[ev.Attempt] = string(ev.Type)
			}
		}
	}
	return out
}
