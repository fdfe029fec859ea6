package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/fleet"

	"github.com/drover-dev/drover/internal/drovertype"
)

// hosts are network namespaces standing in for separate machines: the
// controller's, and one per worker, each worker joined to the controller's by
// a veth pair. Addresses are in 10.213.0.0/24: the controller is .1 on every
// link, worker i is .(i+2). Nothing else is routed, so a worker reaches the
// controller's NATS only over its link.
type hosts struct {
	ctrl    string   // the controller's namespace
	workers []string // one namespace per worker
	ctrlIP  string
}

// exec returns the command prefix that runs a program in namespace ns.
func (h *hosts) exec(ns string) []string { return []string{"ip", "netns", "exec", ns} }

// newHosts creates the namespaces and links, removed when the test ends (the
// namespaces' deletion takes their veth ends with them). It skips the test
// where network namespaces cannot be created: not root, no iproute2, or a
// sandbox that forbids them.
func newHosts(t *testing.T, workers int) *hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("multi-host e2e: creating network namespaces (ip netns add) needs root; skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("multi-host e2e: the ip command (iproute2) is not installed; skipped")
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b) // unique per run: concurrent runs do not collide
	h := &hosts{ctrl: "drover-e2e-" + id + "-c", ctrlIP: "10.213.0.1"}
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	addNS := func(name string) {
		if err := ip("netns", "add", name); err != nil {
			t.Skipf("multi-host e2e: cannot create a network namespace here (%v); skipped", err)
		}
		t.Cleanup(func() {
			if err := ip("netns", "del", name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	addNS(h.ctrl)
	if out, err := exec.Command("ip", "netns", "exec", h.ctrl, "true").CombinedOutput(); err != nil {
		t.Skipf("multi-host e2e: cannot run a process in a network namespace here (ip netns exec: %v: %s); skipped", err, strings.TrimSpace(string(out)))
	}
	must := func(args ...string) {
		t.Helper()
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("-n", h.ctrl, "link", "set", "lo", "up")
	for i := range workers {
		ns := fmt.Sprintf("drover-e2e-%s-w%d", id, i+1)
		addNS(ns)
		h.workers = append(h.workers, ns)
		link := fmt.Sprintf("w%d", i+1) // the controller's end; the worker's is eth0
		addr := fmt.Sprintf("10.213.0.%d", i+2)
		if err := ip("-n", h.ctrl, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			t.Skipf("multi-host e2e: cannot create a veth pair here (%v); skipped", err)
		}
		must("-n", h.ctrl, "addr", "add", h.ctrlIP, "peer", addr, "dev", link)
		must("-n", ns, "addr", "add", addr, "peer", h.ctrlIP, "dev", "eth0")
		must("-n", h.ctrl, "link", "set", link, "up")
		must("-n", ns, "link", "set", "eth0", "up")
		must("-n", ns, "link", "set", "lo", "up")
	}
	return h
}

// TestFlowAcrossHosts runs the controller with its embedded NATS in one
// network namespace and two workers in two others, connected over veth pairs
// as separate hosts would be, and runs a flow to the end. The repository is
// reached by path (the namespaces share the filesystem).
func TestFlowAcrossHosts(t *testing.T) {
	t.Parallel()
	h := newHosts(t, 2)
	// The embedded server listens on the namespace's address without
	// authentication: refused unless the test says it means it.
	c := &cluster{t: t, dataDir: t.TempDir(), env: []string{"DROVER_QUEUE_ACK_WAIT=5s", "DROVER_INSECURE_LISTEN=true"}, prefix: h.exec(h.ctrl)}
	c.startCtrl(h.ctrlIP + ":4222")
	if want := "nats://" + h.ctrlIP + ":4222"; c.url != want {
		t.Fatalf("controller's NATS at %s, want %s", c.url, want)
	}
	var names []string
	for i, ns := range h.workers {
		name := fmt.Sprintf("host-%d", i+1)
		names = append(names, name)
		startIn(t, h.exec(ns), name, []string{"DROVER_QUEUE_ACK_WAIT=5s", "DROVER_WORKER_RUNTIMES=demo"},
			"worker", "run", "--nats-url", c.url, "--id", name, "--work-dir", t.TempDir(), "--slots", "1", "--log-level", "debug")
	}
	// Both workers registered over their links before the flow is queued.
	waitFor(t, 30*time.Second, "both workers to register", func() bool {
		out, _, code := c.cli("workers", "-o", "json")
		var ws []fleet.Registration
		return code == 0 && json.Unmarshal([]byte(out), &ws) == nil && len(ws) == 2
	})

	repo := newRepo(t)
	flowFile := writeFlow(t, `
name: hosts
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: a
    prompt: |
      @sleep 500ms
      @write a.txt from a
  - id: b
    prompt: |
      @sleep 500ms
      @write b.txt from b
  - id: c
    depends_on: [a, b]
    prompt: |
      @require a.txt
      @require b.txt
      @write c.txt saw a and b
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 0 {
		t.Fatalf("submit --watch: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	st := c.status(submittedID(t, out))
	if st.Detail.Flow.State != drovertype.FlowSucceeded {
		t.Errorf("flow %s", st.Detail.Flow.State)
	}
	for _, task := range st.Detail.Tasks {
		if task.State != drovertype.TaskSucceeded {
			t.Errorf("task %s: %s (%+v)", task.ID, task.State, task.Error)
		}
		if task.ID == "c" {
			if got := files(t, repo, task.ResultBranch); !slices.Equal(got, []string{"README.md", "a.txt", "b.txt", "c.txt"}) {
				t.Errorf("c's branch has %v", got)
			}
		}
	}
	for _, a := range st.Detail.Attempts {
		t.Logf("attempt %s ran on %s", a.ID, a.Worker)
		if !slices.Contains(names, a.Worker) {
			t.Errorf("attempt %s ran on %q", a.ID, a.Worker)
		}
	}
}
