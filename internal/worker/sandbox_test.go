package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/telemetry"
)

var noLandlock = WithSandboxProbe(noLandlockProbe)

func testConfig(t *testing.T, env ...string) *config.Config {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("DROVER_WORKER_WORK_DIR", t.TempDir())
	t.Setenv("DROVER_WORKER_RUNTIMES", "shell")
	t.Setenv("DROVER_RUNTIMES_SHELL_BINARY", "/bin/sh")
	t.Setenv("DROVER_RUNTIMES_SHELL_VERSION_ARGS", "-c,echo 1.0")
	t.Setenv("DROVER_WORKER_MIN_FREE_DISK", "0")
	t.Setenv("DROVER_WORKER_HEALTH_INTERVAL", "1s")
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestResolveSandbox(t *testing.T) {
	on := testConfig(t)
	if s := resolveSandbox(on, noLandlockProbe, false); s.sb != nil || s.unavailable == nil ||
		!strings.Contains(s.String(), "unavailable: this kernel has no Landlock (simulated") ||
		!strings.Contains(s.String(), "set worker.sandbox: off") {
		t.Errorf("on, no Landlock: %q", s)
	}
	if s := resolveSandbox(on, noLandlockProbe, true); s.sb != nil || s.unavailable != nil || !strings.HasPrefix(s.String(), "off: controller dev on a kernel that cannot confine") {
		t.Errorf("dev, no Landlock: %q", s)
	}
	if s := resolveSandbox(on, func() sandbox.Support { return sandbox.Support{ABI: 3} }, false); s.unavailable == nil || !strings.Contains(s.String(), "ABI 3 is too old") {
		t.Errorf("ABI 3: %q", s)
	}
	off := testConfig(t, "DROVER_WORKER_SANDBOX=off")
	if s := resolveSandbox(off, noLandlockProbe, false); s.sb != nil || s.unavailable != nil || s.String() != "off: worker.sandbox is off; CLIs run with the worker's own access" {
		t.Errorf("off: %q", s)
	}
	if status, claims := SandboxStatus(off, noLandlockProbe); claims != true || !strings.HasPrefix(status, "off:") {
		t.Errorf("SandboxStatus(off) = %q, %v", status, claims)
	}
	if status, claims := SandboxStatus(on, noLandlockProbe); claims || !strings.HasPrefix(status, "unavailable:") {
		t.Errorf("SandboxStatus(on) = %q, %v", status, claims)
	}
}

func noLandlockProbe() sandbox.Support {
	return sandbox.Support{Err: errors.New("simulated: the kernel was built without it")}
}

// TestNoLandlockClaimsNothing: a worker with the sandbox on, on a kernel
// without Landlock, runs, registers and says why it claims nothing (in its
// registration and /readyz), and leaves its jobs for a worker that can
// confine them.
func TestNoLandlockClaimsNothing(t *testing.T) {
	nc, js := startNATS(t)
	ctx := context.Background()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, err := telemetry.Start("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(ctx) })

	cfg := testConfig(t)
	job := &queue.Job{V: 1, Attempt: "f_t_1", Flow: "f", Task: "t", N: 1, Pool: cfg.Worker.Pool, Runtime: "shell",
		Repo: "/nonexistent/repo.git", Base: "main", Branch: "drover/f/t/1", Prompt: "echo hi"}
	if err := queue.PublishJob(ctx, js, job); err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg, slog.New(slog.DiscardHandler), noLandlock)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx, nc, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.HandBack(); w.Wait() })

	var reg *fleet.Registration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ws, err := fleet.Workers(ctx, js)
		if err == nil && len(ws) == 1 && strings.HasPrefix(ws[0].NotClaiming, "sandbox unavailable") {
			reg = ws[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration never said why it claims nothing: %+v %v", ws, err)
		}
	}
	if !strings.Contains(reg.NotClaiming, "no Landlock") || !strings.HasPrefix(reg.Sandbox, "unavailable:") ||
		len(reg.Runtimes) != 1 || reg.Runtimes[0].Sandbox != reg.Sandbox {
		t.Errorf("registration: %+v", reg)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "fail worker_sandbox: unavailable") {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
	// The claim loop checks the sandbox before it fetches: once it said
	// so, the job is still there, delivered to no one.
	cons, err := js.Consumer(ctx, queue.AttemptsStream, queue.AttemptConsumerName(cfg.Worker.Pool, "shell"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 1 || info.NumAckPending != 0 || info.Delivered.Consumer != 0 {
		t.Errorf("the job was fetched: pending %d, ack pending %d, delivered %d", info.NumPending, info.NumAckPending, info.Delivered.Consumer)
	}
}
