package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/sandbox"
)

// TestNoLandlock runs workers on what looks to them like a kernel without
// Landlock (bin/nolandlock: a seccomp filter answering its system calls
// with ENOSYS). With the sandbox on, a worker runs, registers and says why
// it claims nothing — log, registration, /readyz, `worker runtime health`
// — and its job waits for a worker that can confine it. With
// worker.sandbox off, one runs it, and the report says so.
func TestNoLandlock(t *testing.T) {
	t.Parallel()
	if err := sandbox.Probe().Usable(); err != nil {
		t.Skipf("this kernel cannot confine: every worker is the no-Landlock one (%v)", err)
	}
	noLandlock := []string{filepath.Join(bin, "nolandlock")}
	c := startController(t)

	// worker runtime health says it and fails.
	health := exec.Command(noLandlock[0], filepath.Join(bin, "worker"), "runtime", "health")
	health.Env = append(cleanEnv(), "DROVER_WORKER_RUNTIMES=demo")
	out, err := health.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "sandbox: unavailable: this kernel has no Landlock") ||
		!strings.Contains(string(out), "set worker.sandbox: off to run CLIs unconfined") {
		t.Errorf("worker runtime health: %v\n%s", err, out)
	}

	env := append(append([]string{}, workerEnv...), "DROVER_WORKER_RUNTIMES=demo", "DROVER_HTTP_LISTEN=127.0.0.1:0")
	refusing := startIn(t, noLandlock, "worker-nolandlock", env, "worker", "run", "--nats-url", c.url, "--id", "worker-nolandlock",
		"--work-dir", filepath.Join(t.TempDir(), "w"), "--slots", "1", "--log-level", "debug")
	refusing.waitLog(30*time.Second, `msg="sandbox unavailable: claiming nothing"`)
	if !strings.Contains(readLog(refusing), `err="this kernel has no Landlock (the kernel was built without it); set worker.sandbox: off`) {
		t.Errorf("the worker's log does not say why:\n%s", readLog(refusing))
	}
	var reg *fleet.Registration
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last controller workers -o json: %s", last)
		}
	}()
	waitFor(t, 30*time.Second, "the registration to say why it claims nothing", func() bool {
		stdout, _, code := c.cli("workers", "-o", "json")
		last = stdout
		var ws []*fleet.Registration
		if code != 0 || json.Unmarshal([]byte(stdout), &ws) != nil || len(ws) != 1 {
			return false
		}
		reg = ws[0]
		return strings.HasPrefix(reg.NotClaiming, "sandbox unavailable")
	})
	if !strings.HasPrefix(reg.Sandbox, "unavailable: this kernel has no Landlock") {
		t.Errorf("registration sandbox %q", reg.Sandbox)
	}
	if table, _, _ := c.cli("workers"); !strings.Contains(table, "UNAVAILABLE") || !strings.Contains(table, "sandbox unavailable") {
		t.Errorf("controller workers:\n%s", table)
	}
	addr := regexp.MustCompile(`msg="serving metrics and health" addr=(\S+)`).FindStringSubmatch(readLog(refusing))
	if addr == nil {
		t.Fatal("no metrics address in the worker's log")
	}
	resp, err := http.Get("http://" + addr[1] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "fail worker_sandbox: unavailable: this kernel has no Landlock") {
		t.Errorf("/readyz: %d\n%s", resp.StatusCode, body)
	}

	// Its job waits; a worker that opted out runs it, and says so.
	repo := newRepo(t)
	flowFile := writeFlow(t, "name: nolandlock\nrepo: "+repo+"\nbase: main\ntasks:\n  - {id: a, runtime: demo, prompt: '@write a.txt a'}\n")
	out2, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id := submittedID(t, out2)
	startIn(t, noLandlock, "worker-off", append(append([]string{}, workerEnv...), "DROVER_WORKER_RUNTIMES=demo", "DROVER_WORKER_SANDBOX=off"),
		"worker", "run", "--nats-url", c.url, "--id", "worker-off", "--work-dir", filepath.Join(t.TempDir(), "w"), "--slots", "1", "--log-level", "debug")
	if _, errOut, code := c.cli("watch", id); code != 0 {
		t.Fatalf("watch: %d %s", code, errOut)
	}
	st := c.status(id)
	a := st.Detail.Attempts[0]
	if a.Worker != "worker-off" || a.Report == nil || a.Report.Sandbox != "off: worker.sandbox is off; CLIs run with the worker's own access" {
		t.Errorf("attempt on %s, report sandbox %q", a.Worker, a.Report.Sandbox)
	}
	if strings.Contains(readLog(refusing), `attempt=nolandlock-`) {
		t.Error("the worker that cannot confine touched the attempt")
	}
}

// TestDevWithoutLandlock: `controller dev` (and so `make demo`) on a kernel
// without Landlock runs with the sandbox off, saying so loudly at start and
// on every attempt.
func TestDevWithoutLandlock(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dev := startIn(t, []string{filepath.Join(bin, "nolandlock")}, "controller-dev", nil,
		"controller", "dev", "--workers", "1", "--data-dir", data, "--nats-listen", "127.0.0.1:-1")
	dev.waitLog(30*time.Second, `SANDBOX OFF: CLIs will run with this worker's own access`)
	c := &cluster{t: t, dataDir: data, ctrl: dev}
	repo := newRepo(t)
	out, errOut, code := c.cli("submit", writeFlow(t, "name: devnl\nrepo: "+repo+"\nbase: main\ntasks:\n  - {id: a, runtime: demo, prompt: '@write a.txt a'}\n"), "--watch")
	if code != 0 {
		t.Fatalf("submit: %d\n%s\n%s", code, out, errOut)
	}
	st := c.status(submittedID(t, out))
	if r := st.Detail.Attempts[0].Report; r == nil || !strings.HasPrefix(r.Sandbox, "off: controller dev on a kernel that cannot confine (this kernel has no Landlock") {
		t.Errorf("report sandbox %+v", r)
	}
	if !strings.Contains(readLog(dev), `msg="this attempt runs without the sandbox"`) {
		t.Error("the attempt did not say it ran unconfined")
	}
}
