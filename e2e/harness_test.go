package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/controller"
)

// bin holds the binaries built once for the whole package.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "drover-e2e-bin-")
	if err != nil {
		panic(err)
	}
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../cmd/controller", "../cmd/worker", "../cmd/demo-agent")...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("e2e: build binaries:", err)
		os.Exit(1)
	}
	// The fleet simulator drives the controller under test; it is built
	// without the race detector, which would multiply the CPU its 50
	// workers take on a shared machine (their code has its own tests).
	cmd = exec.Command("go", "build", "-o", dir+"/", "../cmd/fleetsim")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("e2e: build fleetsim:", err)
		os.Exit(1)
	}
	// The real nats-server, from the module Drover embeds, for the tests
	// that run NATS as its own process (restarts, a cluster).
	cmd = exec.Command("go", "build", "-o", filepath.Join(dir, "nats-server"), "github.com/nats-io/nats-server/v2")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("e2e: build nats-server:", err)
		os.Exit(1)
	}
	// A kernel without Landlock, for the processes started under it.
	cmd = exec.Command("go", "build", "-o", filepath.Join(dir, "nolandlock"), "./testdata/nolandlock")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("e2e: build nolandlock:", err)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a started Drover process whose output goes to a log file.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startIn(t, nil, name, env, args...)
}

// startIn starts a Drover binary under a command prefix, e.g. `ip netns exec
// NS` to run it in another network namespace (prefix[0] is looked up in PATH;
// the process keeps its pid, as ip netns exec execs the command).
func startIn(t *testing.T, prefix []string, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	binary := args[0]
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(bin, binary)
	}
	argv := append(append(slices.Clone(prefix), binary), args[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(append(cleanEnv(), "GORACE=halt_on_error=1 exitcode=66", "GOTRACEBACK=all"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("E2E_DUMP") != "" {
			select {
			case <-p.done:
			default:
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.done:
				case <-time.After(10 * time.Second):
				}
			}
		}
		p.stop()
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && ee.ExitCode() == 66 {
			t.Errorf("%s: the race detector found a data race (see its log)", name)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if d := os.Getenv("E2E_DUMP"); d != "" {
				_ = os.MkdirAll(d, 0o755)
				_ = os.WriteFile(filepath.Join(d, name+".log"), b, 0o644)
			}
			t.Logf("---- %s log ----\n%s", name, tail(string(b), 6000))
		}
	})
	return p
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

// cleanEnv keeps the test's environment from configuring Drover by accident:
// DROVER_* and OTEL_* (which can turn tracing on) are left out.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROVER_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// cluster is a controller with embedded NATS plus workers, or a controller
// and workers on a NATS of their own (external).
type cluster struct {
	t        *testing.T
	dataDir  string
	ctrl     *proc
	url      string
	env      []string
	external bool     // url is a nats-server process, not the controller's
	cliEnv   []string // the environment of cli commands, e.g. NATS credentials
	// prefix runs the controller and the CLI commands under a command, e.g.
	// `ip netns exec NS` (see startIn); nil runs them directly.
	prefix []string
	// ctrlBin is the controller daemon's binary, when not bin's.
	ctrlBin string
}

func startController(t *testing.T, extraEnv ...string) *cluster {
	t.Helper()
	return startControllerBin(t, "", extraEnv...)
}

// startControllerBin is startController with the daemon run from another
// binary ("" for bin's); the CLI commands stay bin's.
func startControllerBin(t *testing.T, binary string, extraEnv ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dataDir: t.TempDir(), env: append([]string{"DROVER_QUEUE_ACK_WAIT=5s"}, extraEnv...), ctrlBin: binary}
	c.startCtrl("127.0.0.1:-1")
	return c
}

// restartController kills the controller (SIGKILL, or SIGTERM when !kill)
// and starts it again on the same data dir and NATS port, so workers
// reconnect by themselves.
func (c *cluster) restartController(kill bool) {
	c.t.Helper()
	if kill {
		_ = syscall.Kill(-c.ctrl.cmd.Process.Pid, syscall.SIGKILL)
		<-c.ctrl.done
	} else {
		c.ctrl.stop()
	}
	_ = os.Remove(filepath.Join(c.dataDir, "nats.url"))
	c.startCtrl(strings.TrimPrefix(c.url, "nats://"))
}

// waitLog waits until the process has logged substr, failing the test if
// it exits first.
func (p *proc) waitLog(timeout time.Duration, substr string) {
	p.t.Helper()
	waitFor(p.t, timeout, p.name+" to log "+strconv.Quote(substr), func() bool {
		if p.logged(substr) {
			return true
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited: %v", p.name, p.err)
		default:
		}
		return false
	})
}

// readLog returns what the process has logged so far.
func readLog(p *proc) string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// logged reports whether the process's log holds substr.
func (p *proc) logged(substr string) bool {
	b, _ := os.ReadFile(p.log)
	return bytes.Contains(b, []byte(substr))
}

// kill sends SIGKILL to the process alone (not its group: a killed worker's
// CLI must die because its parent did) and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// startControllerOn starts a controller on an external NATS at url.
func startControllerOn(t *testing.T, url string, extraEnv ...string) *cluster {
	t.Helper()
	return startControllerBinOn(t, "", url, extraEnv...)
}

// startControllerBinOn is startControllerOn with a controller binary of
// the test's ("" for the harness's).
func startControllerBinOn(t *testing.T, binary, url string, extraEnv ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dataDir: t.TempDir(), url: url, external: true,
		env: append([]string{"DROVER_QUEUE_ACK_WAIT=5s"}, extraEnv...), ctrlBin: binary}
	c.startCtrl("")
	return c
}

func (c *cluster) startCtrl(listen string) {
	t := c.t
	binary := "controller"
	if c.ctrlBin != "" {
		binary = c.ctrlBin
	}
	if c.external {
		c.ctrl = startIn(t, c.prefix, "controller", c.env, binary, "serve", "--data-dir", c.dataDir, "--nats-url", c.url, "--log-level", "debug")
		c.ctrl.waitLog(30*time.Second, "controller serving")
		return
	}
	c.ctrl = startIn(t, c.prefix, "controller", c.env, binary, "serve", "--data-dir", c.dataDir, "--nats-listen", listen, "--log-level", "debug")
	urlFile := filepath.Join(c.dataDir, "nats.url")
	waitFor(t, 30*time.Second, "controller to write nats.url", func() bool {
		b, err := os.ReadFile(urlFile)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			c.url = strings.TrimSpace(string(b))
			return true
		}
		select {
		case <-c.ctrl.done:
			t.Fatalf("controller exited: %v", c.ctrl.err)
		default:
		}
		return false
	})
}

// workerEnv is every test worker's: short leases, a short drain so a
// test's cleanup does not wait, and a free-disk floor low enough for the
// shared machines the tests run on (the disk check has its own test).
var workerEnv = []string{"DROVER_QUEUE_ACK_WAIT=5s", "DROVER_WORKER_DRAIN_TIMEOUT=2s", "DROVER_WORKER_MIN_FREE_DISK=16MiB"}

func (c *cluster) startWorker(name string, slots int, extraEnv ...string) *proc {
	return c.startWorkerIn(name, filepath.Join(c.t.TempDir(), name), slots, extraEnv...)
}

// startWorkerIn starts a worker on a given work dir: a restarted worker
// finds what its previous process left there.
func (c *cluster) startWorkerIn(name, workDir string, slots int, extraEnv ...string) *proc {
	env := append(append([]string{}, workerEnv...), extraEnv...)
	return start(c.t, name, env, "worker", "run", "--nats-url", c.url, "--id", name,
		"--work-dir", workDir, "--slots", fmt.Sprint(slots), "--log-level", "debug")
}

// cli runs a controller CLI command and returns its stdout, stderr and exit code.
func (c *cluster) cli(args ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append(args, "--data-dir", c.dataDir)
	if c.external {
		args = append(args, "--nats-url", c.url)
	}
	argv := append(append(slices.Clone(c.prefix), filepath.Join(bin, "controller")), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), c.cliEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("controller %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func (c *cluster) status(flowID string) *controller.StatusResponse {
	c.t.Helper()
	args := []string{"status", flowID, "-o", "json"}
	if flowID != "" {
		args = append(args, "--all") // every task, not a page
	}
	out, errOut, code := c.cli(args...)
	if code != 0 {
		c.t.Fatalf("status %s: exit %d: %s", flowID, code, errOut)
	}
	var st controller.StatusResponse
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("status %s: %v\n%s", flowID, err, out)
	}
	return &st
}

// report returns an attempt's whole report, stdout tail included, as
// `controller report -o json` prints it.
func (c *cluster) report(target string) *event.Report {
	c.t.Helper()
	out, errOut, code := c.cli("report", target, "-o", "json")
	var resp controller.ReportResponse
	if err := json.Unmarshal([]byte(out), &resp); code != 0 || err != nil || resp.Report == nil {
		c.t.Fatalf("report %s: exit %d, %v\n%s\n%s", target, code, err, out, errOut)
	}
	return resp.Report
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// git runs git with a fixed identity and no user config.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a bare repository with one commit on main.
func newRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "repo.git")
	git(t, root, "init", "-q", "--bare", bare)
	seed := filepath.Join(root, "seed")
	git(t, root, "init", "-q", seed)
	if err := os.WriteFile(filepath.Join(seed, "README.md"), []byte("# test repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, seed, "add", "-A")
	git(t, seed, "commit", "-q", "-m", "initial")
	git(t, seed, "push", "-q", bare, "HEAD:refs/heads/main")
	return bare
}

// files lists the files of a branch in a bare repo.
func files(t *testing.T, repo, branch string) []string {
	t.Helper()
	return strings.Fields(git(t, repo, "ls-tree", "-r", "--name-only", branch))
}

func show(t *testing.T, repo, branch, path string) string {
	t.Helper()
	return git(t, repo, "show", branch+":"+path)
}

func writeFlow(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flow.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func submittedID(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "submitted flow "); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no flow id in submit output:\n%s", out)
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
