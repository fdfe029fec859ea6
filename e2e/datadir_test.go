package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/dirlock"
	"github.com/drover-dev/drover/internal/exitcode"
)

// TestOneOwnerOfDataDir starts `controller dev` on a data dir, then a second
// `controller dev` and a `controller serve` on it as soon as the first holds
// the dir — before its nats-server, streams and workers are up — and again
// once it runs. Each is refused with exit 5 and a message naming the first,
// touches nothing (no nats-server on the live store, nats.url kept), and
// the first goes on: `status --data-dir` finds it and a flow succeeds.
func TestOneOwnerOfDataDir(t *testing.T) {
	t.Parallel()
	c := &cluster{t: t, dataDir: t.TempDir(), env: append([]string{}, workerEnv...)}
	c.ctrl = start(t, "controller", c.env, "controller", "dev", "--data-dir", c.dataDir, "--nats-listen", "127.0.0.1:-1",
		"--workers", "2", "--log-level", "debug")
	pid := c.ctrl.cmd.Process.Pid
	waitFor(t, 30*time.Second, "the first controller to lock its data dir", func() bool {
		h, held := dirlock.Read(c.dataDir)
		return held && h.PID == pid
	})

	// second tries a controller on the same dir and checks the refusal.
	second := func(when string, args ...string) {
		t.Helper()
		name := fmt.Sprintf("%s-%s", args[0], when)
		p := start(t, name, c.env, append([]string{"controller"}, append(args, "--data-dir", c.dataDir, "--log-level", "debug")...)...)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was not refused within 30s", name)
		}
		var ee *exec.ExitError
		code := 0
		if errors.As(p.err, &ee) {
			code = ee.ExitCode()
		}
		log := readLog(p)
		want := fmt.Sprintf("data dir %s is in use by pid %d (controller dev --data-dir=%s", c.dataDir, pid, c.dataDir)
		if code != exitcode.Busy || !strings.Contains(log, want) || !strings.Contains(log, "running since") {
			t.Errorf("%s: exit %d, want %d with %q:\n%s", name, code, exitcode.Busy, want, log)
		}
		if strings.Contains(log, "nats-server") || strings.Contains(log, "controller serving") {
			t.Errorf("%s started something before it was refused:\n%s", name, log)
		}
	}
	// Before the first has written nats.url (its NATS, streams and workers
	// come after), unless it was very quick.
	_, urlEarly := os.Stat(filepath.Join(c.dataDir, "nats.url"))
	second("early", "dev", "--nats-listen", "127.0.0.1:-1", "--workers", "1")
	second("early", "serve", "--nats-listen", "127.0.0.1:-1")
	t.Logf("the early attempts ran with nats.url written: %t", urlEarly == nil)

	waitFor(t, 60*time.Second, "the first controller to serve", func() bool {
		if b, err := os.ReadFile(filepath.Join(c.dataDir, "nats.url")); err == nil && len(b) > 0 {
			c.url = strings.TrimSpace(string(b))
			return true
		}
		select {
		case <-c.ctrl.done:
			t.Fatalf("the first controller exited: %v", c.ctrl.err)
		default:
		}
		return false
	})
	waitFor(t, 30*time.Second, "its workers to register", func() bool {
		out, _, code := c.cli("workers")
		return code == 0 && strings.Contains(out, "dev-worker-1") && strings.Contains(out, "dev-worker-2")
	})
	urlBefore, _ := os.ReadFile(filepath.Join(c.dataDir, "nats.url"))
	second("late", "dev", "--nats-listen", "127.0.0.1:-1", "--workers", "1")
	second("late", "serve", "--nats-listen", "127.0.0.1:-1")
	if urlAfter, err := os.ReadFile(filepath.Join(c.dataDir, "nats.url")); err != nil || string(urlAfter) != string(urlBefore) {
		t.Fatalf("nats.url after the refusals: %q, %v; was %q", urlAfter, err, urlBefore)
	}

	// The first goes on: found through the data dir, and running flows.
	if out, errOut, code := c.cli("status"); code != 0 {
		t.Fatalf("status --data-dir: exit %d: %s%s", code, out, errOut)
	}
	repo := newRepo(t)
	out, errOut, code := c.cli("submit", writeFlow(t, "name: after\nrepo: "+repo+"\nruntime: demo\ntasks:\n  - id: a\n    prompt: \"@write ok.txt fine\"\n"), "--watch")
	if code != 0 {
		t.Fatalf("a flow after the refusals: exit %d\n%s\n%s", code, out, errOut)
	}
	select {
	case <-c.ctrl.done:
		t.Fatalf("the first controller exited: %v", c.ctrl.err)
	default:
	}
	if c.ctrl.logged("level=ERROR") {
		t.Errorf("the first controller logged errors:\n%s", tail(readLog(c.ctrl), 4000))
	}

	// Stopped, it releases the dir: a controller starts on it again.
	c.ctrl.stop()
	if _, held := dirlock.Read(c.dataDir); held {
		t.Error("the data dir is still locked after the controller stopped")
	}
}
