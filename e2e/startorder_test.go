package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// The start-order tests (docs/operations.md#start-order): the controller and
// workers are started before what they need — NATS, JetStream with a
// leader, the controller's streams and buckets — and must wait for it, not
// exit: the same processes then run a flow.

// daemon is a started controller or worker with its HTTP listener.
type daemon struct {
	*proc
	http string // host:port of /healthz and /readyz
}

func httpListen(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }

// externalCluster is a cluster on NATS at url with nothing started yet.
func externalCluster(t *testing.T, url string, extraEnv ...string) *cluster {
	return &cluster{t: t, dataDir: t.TempDir(), url: url, external: true,
		env: append([]string{"DROVER_QUEUE_ACK_WAIT=5s"}, extraEnv...)}
}

// startWaitingController starts the controller without waiting for it to
// serve (nothing may answer at c.url yet).
func (c *cluster) startWaitingController() *daemon {
	addr := httpListen(c.t)
	c.ctrl = start(c.t, "controller", c.env, "controller", "serve", "--data-dir", c.dataDir, "--nats-url", c.url,
		"--http-listen", addr, "--log-level", "debug")
	return &daemon{c.ctrl, addr}
}

func (c *cluster) startWaitingWorker(name string, extraEnv ...string) *daemon {
	addr := httpListen(c.t)
	return &daemon{c.startWorker(name, 1, append([]string{"DROVER_HTTP_LISTEN=" + addr}, extraEnv...)...), addr}
}

// get fetches path from d's listener: the status code (0 when it did not
// answer) and the body.
func (d *daemon) get(path string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + d.http + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitUnready waits until d is alive (/healthz 200) but not ready, its
// /readyz saying want; it fails the test if d exits.
func (d *daemon) waitUnready(timeout time.Duration, want string) {
	d.t.Helper()
	var last string
	waitFor(d.t, timeout, d.name+" to be alive and not ready ("+want+")", func() bool {
		d.alive()
		code, body := d.get("/readyz")
		last = body
		if code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			return false
		}
		code, _ = d.get("/healthz")
		return code == http.StatusOK
	})
	d.t.Logf("%s not ready: %s", d.name, strings.TrimSpace(last))
}

func (d *daemon) waitReady(timeout time.Duration) {
	d.t.Helper()
	waitFor(d.t, timeout, d.name+" to be ready", func() bool {
		d.alive()
		code, _ := d.get("/readyz")
		return code == http.StatusOK
	})
}

// alive fails the test if d has exited: a daemon that meets NATS missing
// must wait, never exit for its supervisor to restart it.
func (d *daemon) alive() {
	d.t.Helper()
	select {
	case <-d.done:
		d.t.Fatalf("%s (pid %d) exited: %v", d.name, d.cmd.Process.Pid, d.err)
	default:
	}
}

// waitLines counts d's log lines saying it waits for what, and the tries
// its "ready" line counts.
func (d *daemon) waitLines(what string) (lines, tries int) {
	log := readLog(d.proc)
	lines = strings.Count(log, `msg="waiting for `+what+`"`) + strings.Count(log, `msg="still waiting for `+what+`"`)
	if m := regexp.MustCompile(`msg="` + regexp.QuoteMeta(what) + ` ready" waited=\S+ tries=(\d+)`).FindStringSubmatch(log); m != nil {
		tries, _ = strconv.Atoi(m[1])
	}
	return lines, tries
}

// stopFirst stops the daemons before what was started earlier than this
// call is stopped: a NATS started after them would otherwise go first, and
// their shutdown wait out its absence.
func stopFirst(t *testing.T, ds ...*daemon) {
	t.Cleanup(func() {
		for _, d := range ds {
			d.stop()
		}
	})
}

func needNATSServer(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(bin, "nats-server")); err != nil {
		t.Skipf("no nats-server binary: %v", err)
	}
}

const startOrderFlow = `name: %s
repo: %s
base: main
runtime: demo
tasks:
  - id: a
    prompt: "@write a.txt from a"
  - id: b
    depends_on: [a]
    prompt: "@require a.txt\n@write b.txt from b"
`

// runFlow submits a two-task flow and waits for it to succeed.
func (c *cluster) runFlow(name string) {
	c.t.Helper()
	repo := newRepo(c.t)
	id := c.submit(fmt.Sprintf(startOrderFlow, name, repo))
	c.waitFlow(id, 60*time.Second, drovertype.FlowSucceeded)
	if got := files(c.t, repo, "drover/"+id+"/integration"); len(got) != 3 {
		c.t.Errorf("integration branch has %v, want README.md, a.txt, b.txt", got)
	}
}

// TestStartOrderNATSLate: the controller and two workers start against a
// NATS URL where nothing listens; nats-server starts 10 s later. They wait
// — alive, not ready, saying what they wait for once, not at every try —
// and then serve a flow, none of them restarted. NATS lost later makes
// them unready until it is back.
func TestStartOrderNATSLate(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	node := newNATSCluster(t, 1)[0]
	started := time.Now()
	c := externalCluster(t, node.url())
	ctrl := c.startWaitingController()
	w1, w2 := c.startWaitingWorker("worker-1"), c.startWaitingWorker("worker-2")
	daemons := []*daemon{ctrl, w1, w2}
	for _, d := range daemons {
		d.waitUnready(20*time.Second, "waiting for NATS: NATS at "+node.url()+" is unreachable")
	}
	// NATS comes 10 s after them: a timer, not a condition to wait for.
	select {
	case <-time.After(time.Until(started.Add(10 * time.Second))):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	for _, d := range daemons {
		d.alive()
	}
	node.start()
	stopFirst(t, daemons...)
	t.Logf("nats-server started %s after the daemons", time.Since(started).Round(time.Millisecond))
	for _, d := range daemons {
		d.waitReady(30 * time.Second)
	}
	t.Logf("all ready %s after the daemons started", time.Since(started).Round(time.Millisecond))
	c.runFlow("late-nats")
	t.Logf("flow done %s after the daemons started", time.Since(started).Round(time.Millisecond))
	for _, d := range daemons {
		d.alive()
		lines, tries := d.waitLines("NATS")
		// About ten tries in ten seconds, one reason: the log says it
		// once (twice if the server was caught starting).
		if tries < 4 || lines < 1 || lines > 2 {
			t.Errorf("%s: %d log lines about waiting for NATS over %d tries, want 1 or 2 over at least 4", d.name, lines, tries)
		}
	}
	if n := strings.Count(readLog(c.ctrl), `msg="controller serving"`); n != 1 {
		t.Errorf("controller started serving %d times", n)
	}
	for _, w := range []*daemon{w1, w2} {
		if n := strings.Count(readLog(w.proc), `msg="worker running"`); n != 1 {
			t.Errorf("%s started running %d times", w.name, n)
		}
	}

	// Ready, then NATS goes away: not ready while disconnected, ready
	// again once it is back, still the same processes.
	node.kill()
	ctrl.waitUnready(20*time.Second, "fail nats: not connected")
	for _, w := range []*daemon{w1, w2} {
		w.waitUnready(20*time.Second, "fail worker_nats: not connected")
	}
	node.start()
	stopFirst(t, daemons...)
	for _, d := range daemons {
		d.waitReady(30 * time.Second)
	}
}

// TestStartOrderWorkerFirst: a worker started before the controller, with
// NATS up but no Drover stream or bucket, waits for them (creating none)
// and runs the controller's flow once it has come.
func TestStartOrderWorkerFirst(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	node := startNATS(t)
	c := externalCluster(t, node.url())
	w := c.startWaitingWorker("worker-1")
	w.waitUnready(20*time.Second, "waiting for Drover's buckets: bucket drover-claims: queue: not created yet")
	if !w.logged(`msg="waiting for Drover's buckets"`) {
		t.Error("the worker's log does not say what it waits for")
	}
	ctrl := c.startWaitingController()
	ctrl.waitReady(30 * time.Second)
	w.waitReady(30 * time.Second)
	c.runFlow("worker-first")
	w.alive()
	if n := strings.Count(readLog(w.proc), `msg="worker running"`); n != 1 {
		t.Errorf("worker started running %d times", n)
	}
}

// TestStartOrderClusterElecting: a 3-node JetStream cluster starts with
// the controller and workers: one node first, which cannot elect a leader
// alone, so JetStream does not answer; the other two once the controller
// says it waits for JetStream. The controller creates its R3 streams once
// the cluster can place them, and a flow runs.
func TestStartOrderClusterElecting(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	nodes := newNATSCluster(t, 3)
	url := clusterURL(nodes)
	nodes[0].start()
	c := externalCluster(t, url, "DROVER_NATS_REPLICAS=3")
	ctrl := c.startWaitingController()
	w1, w2 := c.startWaitingWorker("worker-1"), c.startWaitingWorker("worker-2")
	ctrl.waitUnready(30*time.Second, "waiting for JetStream")
	for _, w := range []*daemon{w1, w2} {
		w.waitUnready(30*time.Second, "waiting for Drover's buckets")
	}
	nodes[1].start()
	nodes[2].start()
	stopFirst(t, ctrl, w1, w2)
	for _, d := range []*daemon{ctrl, w1, w2} {
		d.waitReady(45 * time.Second)
	}
	c.runFlow("electing")
	for _, d := range []*daemon{ctrl, w1, w2} {
		d.alive()
	}
	// The controller met JetStream without a leader (its first request to
	// the lone node goes unanswered), the workers the buckets missing.
	if !ctrl.logged(`msg="waiting for JetStream"`) {
		t.Error("the controller did not log that it waited for JetStream")
	}
	for _, w := range []*daemon{w1, w2} {
		if !w.logged(`msg="waiting for Drover's buckets"`) {
			t.Errorf("%s did not log that it waited for the buckets", w.name)
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("events stream has %d replicas, want 3", r)
	}
}

// TestStartOrderConfigErrorsExit: what no wait fixes ends the controller at
// once, non-zero, saying what to change: credentials NATS refuses, and
// replicas a standalone server cannot give. It is not waited on.
func TestStartOrderConfigErrorsExit(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	node := newNATSCluster(t, 1)[0]
	conf, err := os.ReadFile(node.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf = append(conf, "authorization { user: drover, password: \"the-password\" }\n"...)
	if err := os.WriteFile(node.conf, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	node.start()
	creds := []string{"DROVER_NATS_USER=drover", "DROVER_NATS_PASSWORD=the-password"}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no credentials", nil, "refused the connection: authorization violation"},
		{"wrong password", []string{"DROVER_NATS_USER=drover", "DROVER_NATS_PASSWORD=not-the-password"}, "refused the connection: authorization violation"},
		{"replicas on a standalone server", append(creds, "DROVER_NATS_REPLICAS=3"), "nats.replicas is above 1 but the NATS server is not clustered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := externalCluster(t, node.url(), tc.env...)
			ctrl := c.startWaitingController()
			select {
			case <-ctrl.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the controller still runs")
			}
			log := readLog(ctrl.proc)
			if ctrl.err == nil || !strings.Contains(log, tc.want) {
				t.Errorf("exit %v, want non-zero and the log saying %q:\n%s", ctrl.err, tc.want, log)
			}
			if strings.Contains(log, "waiting for") {
				t.Errorf("the controller waited on a configuration error:\n%s", log)
			}
		})
	}
}

// TestStartOrderStopWhileWaiting: SIGTERM while a daemon waits for NATS
// ends it at once and cleanly (exit 0).
func TestStartOrderStopWhileWaiting(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	node := newNATSCluster(t, 1)[0] // never started
	c := externalCluster(t, node.url())
	for _, d := range []*daemon{c.startWaitingController(), c.startWaitingWorker("worker-1")} {
		d.waitUnready(20*time.Second, "waiting for NATS")
		sent := time.Now()
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still runs 10s after SIGTERM", d.name)
		}
		t.Logf("%s exited %s after SIGTERM", d.name, time.Since(sent).Round(time.Millisecond))
		if d.err != nil || !d.logged("stopped while starting") {
			t.Errorf("%s: exit %v, want 0 and the log saying it stopped while starting:\n%s", d.name, d.err, readLog(d.proc))
		}
	}
}

// TestStartOrderDeniedStepExits: a worker whose NATS user may not create
// its consumer (pool gpu, with the permissions of examples/nats for pool
// default) gets no answer from NATS; it exits non-zero naming the subject
// instead of waiting forever.
func TestStartOrderDeniedStepExits(t *testing.T) {
	t.Parallel()
	needNATSServer(t)
	perms, err := os.ReadFile("../examples/nats/permissions.conf")
	if err != nil {
		t.Skipf("no permissions file: %v", err)
	}
	node := newNATSCluster(t, 1)[0]
	dir := filepath.Dir(node.conf)
	if err := os.WriteFile(filepath.Join(dir, "permissions.conf"), perms, 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(node.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf = append(conf, `authorization {
  include "permissions.conf"
  users = [
    {user: controller, password: "ctrl-pass-0123456789", permissions: $DROVER_CONTROLLER}
    {user: worker, password: "worker-pass-0123456789", permissions: $DROVER_WORKER}
    {user: operator, password: "op-pass-0123456789", permissions: $DROVER_OPERATOR}
  ]
}
`...)
	if err := os.WriteFile(node.conf, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	node.start()
	c := externalCluster(t, node.url(), "DROVER_NATS_USER=controller", "DROVER_NATS_PASSWORD=ctrl-pass-0123456789")
	c.startWaitingController().waitReady(30 * time.Second)
	w := c.startWaitingWorker("worker-gpu", "DROVER_NATS_USER=worker", "DROVER_NATS_PASSWORD=worker-pass-0123456789",
		"DROVER_WORKER_POOL=gpu", "DROVER_WORKER_RUNTIMES=demo")
	select {
	case <-w.done:
	case <-time.After(45 * time.Second):
		t.Fatal("the worker still runs")
	}
	const subject = `Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.DROVER_ATTEMPTS.attempts_gpu_demo.drover.attempts.gpu.demo"`
	if log := readLog(w.proc); w.err == nil || !strings.Contains(log, "error: worker: ") || !strings.Contains(log, subject) {
		t.Errorf("exit %v, want non-zero and the error naming the subject:\n%s", w.err, log)
	}
}
