package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/drover-dev/drover/internal/natsconn"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
)

// TestSecureFleet runs a fleet the way docs/security.md recommends: the
// embedded server configured through nats.server_config with TLS (an ad-hoc
// CA, client certificates required) and users holding the roles of
// examples/nats/permissions.conf, used verbatim. A flow completes with a
// worker that has only the worker role, operator commands work with the
// operator role, and what the roles must not do is refused: a worker
// without credentials, a worker-role connection publishing on the operator
// API, deleting a stream or forging a decision, a client that does not
// trust the server's CA.
func TestSecureFleet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := natstest.NewPKI(t, dir)
	perms, err := os.ReadFile("../examples/nats/permissions.conf")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "permissions.conf"), string(perms))
	workerSeed, workerKey := natstest.NKeyUser(t)
	seedFile := filepath.Join(dir, "worker.nk")
	writeTestFile(t, seedFile, workerSeed)
	const ctrlPass, opPass = "ctrl-pass-0123456789", "op-pass-0123456789"
	serverConf := filepath.Join(dir, "server.conf")
	writeTestFile(t, serverConf, `
tls {
  cert_file: "`+pki.ServerCert+`"
  key_file: "`+pki.ServerKey+`"
  ca_file: "`+pki.CA+`"
  verify: true
}
authorization {
  include "permissions.conf"
  users = [
    {user: controller, password: $DROVER_TEST_CONTROLLER_PASSWORD, permissions: $DROVER_CONTROLLER}
    {nkey: `+workerKey+`, permissions: $DROVER_WORKER}
    {user: operator, password: "`+opPass+`", permissions: $DROVER_OPERATOR}
  ]
}
`)
	tlsEnv := []string{"DROVER_NATS_TLS_CA_FILE=" + pki.CA, "DROVER_NATS_TLS_CERT_FILE=" + pki.ClientCert, "DROVER_NATS_TLS_KEY_FILE=" + pki.ClientKey}
	c := startController(t, append([]string{
		"DROVER_NATS_SERVER_CONFIG=" + serverConf,
		"DROVER_TEST_CONTROLLER_PASSWORD=" + ctrlPass, // read by the server config
		"DROVER_NATS_USER=controller", "DROVER_NATS_PASSWORD=" + ctrlPass,
	}, tlsEnv...)...)
	if !strings.HasPrefix(c.url, "tls://") {
		t.Fatalf("the embedded server with TLS advertises %s, want a tls:// URL", c.url)
	}
	c.cliEnv = append([]string{"DROVER_NATS_USER=operator", "DROVER_NATS_PASSWORD=" + opPass}, tlsEnv...)
	workerEnv := append([]string{"DROVER_NATS_NKEY_FILE=" + seedFile}, tlsEnv...)
	w := c.startWorker("worker-1", 1, append(workerEnv, "DROVER_WORKER_RUNTIMES=demo")...)

	// A worker without credentials is refused at start, and says why.
	nocreds := c.startWorker("worker-nocreds", 1, append(tlsEnv, "DROVER_WORKER_RUNTIMES=demo")...)
	select {
	case <-nocreds.done:
	case <-time.After(20 * time.Second):
		t.Fatal("a worker without credentials is still running")
	}
	var ee *exec.ExitError
	if !errors.As(nocreds.err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("worker without credentials: exit %v, want a non-zero exit", nocreds.err)
	}
	const refused = "worker: NATS at " // … refused the connection: authorization violation (set …)
	if log := readLog(nocreds); !strings.Contains(log, refused) ||
		!strings.Contains(log, "refused the connection: authorization violation (set nats.user/nats.password, nats.token, nats.nkey_file or nats.creds_file)") {
		t.Errorf("worker without credentials says:\n%s", log)
	}

	// The flow: a task, a dependent one and the integration, all run by
	// the worker role.
	repo := newRepo(t)
	flowFile := writeFlow(t, `
name: secure
repo: `+repo+`
runtime: demo
tasks:
  - id: a
    prompt: |
      @write a.txt from a
  - id: b
    depends_on: [a]
    prompt: |
      @require a.txt
      @write b.txt from b
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 0 {
		t.Fatalf("submit --watch with the operator role: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	st := c.status(id)
	if st.Detail.Flow.State != drovertype.FlowSucceeded {
		t.Errorf("flow %s, want succeeded", st.Detail.Flow.State)
	}
	for _, a := range st.Detail.Attempts {
		if a.Worker != "worker-1" {
			t.Errorf("attempt %s ran on %q", a.ID, a.Worker)
		}
	}
	// The operator role reads what the operator commands read.
	for _, args := range [][]string{{"events", id}, {"logs", id + "/a"}, {"diff", id + "/b"}, {"report", id + "/a"}, {"workers"}, {"dead-letters"}} {
		if out, errOut, code := c.cli(args...); code != 0 {
			t.Errorf("%v with the operator role: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}

	// A flow larger than a NATS message travels through the transfers
	// store, and so does its status: both ways with the operator role. Its
	// tasks wait on a gate that fails, so none of them runs.
	var large strings.Builder
	large.WriteString("name: large\nrepo: " + repo + "\nruntime: demo\nretry:\n  max_attempts: 1\ntasks:\n  - id: gate\n    prompt: \"@exit 3\"\n")
	for i := range 2500 {
		fmt.Fprintf(&large, "  - id: t%04d\n    depends_on: [gate]\n    prompt: %s\n", i, strings.Repeat("x", 500))
	}
	if large.Len() <= 1<<20 {
		t.Fatalf("the large flow is %d bytes, not more than a message", large.Len())
	}
	out, errOut, code = c.cli("submit", writeFlow(t, large.String()))
	if code != 0 {
		t.Fatalf("submit of a %d-byte flow with the operator role: exit %d\n%s\n%s", large.Len(), code, out, errOut)
	}
	largeID := submittedID(t, out)
	waitFor(t, time.Minute, "the large flow to fail", func() bool { return c.status(largeID).Detail.Flow.State.Terminal() })
	// Every task's row (--all): pages of 1,000 rows, each more than a message.
	out, errOut, code = c.cli("status", largeID, "--all", "-o", "json")
	if code != 0 || len(out) <= 1<<20 {
		t.Fatalf("status of the large flow: exit %d, %d bytes (want more than a message)\n%s", code, len(out), errOut)
	}
	if st := c.status(largeID); st.Detail.Flow.State != drovertype.FlowFailed || len(st.Detail.Tasks) != 2501 {
		t.Errorf("large flow %s with %d tasks, want failed with 2501", st.Detail.Flow.State, len(st.Detail.Tasks))
	}

	// A flow id becomes a subject filter: a wildcard is refused before
	// anything is read.
	if _, errOut, code := c.cli("events", "*"); code != 2 || !strings.Contains(errOut, "invalid id") {
		t.Errorf("events '*': exit %d: %s", code, errOut)
	}

	// The worker role cannot reach the operator API, delete a stream, take
	// another pool's jobs or record a decision.
	violations := make(chan string, 16)
	co := natsconn.ClientOptions{
		URL: c.url, Name: "intruder", Role: natsconn.RoleWorker, ID: "intruder", NKeyFile: seedFile,
		TLS:    natsconn.ClientTLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
		Logger: slog.New(&recordHandler{msgs: violations}),
	}
	nc, err := natsconn.Connect(co)
	if err != nil {
		t.Fatalf("worker-role connection: %v", err)
	}
	defer nc.Close()
	for _, subj := range []string{"drover.api.submit", "$JS.API.CONSUMER.MSG.NEXT.DROVER_ATTEMPTS.attempts_gpu_demo", "drover.events." + id + ".flow_completed"} {
		if err := nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		waitViolation(t, violations, subj)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, queue.EventsStream); err == nil {
		t.Error("the worker role deleted the events stream")
	}
	waitViolation(t, violations, "$JS.API.STREAM.DELETE."+queue.EventsStream)

	// A job too large for a message waits in the jobs store: the worker
	// role reads what the controller role stored there, and stores nothing.
	ctrlNC, err := natsconn.Connect(natsconn.ClientOptions{
		URL: c.url, Name: "test-controller", Role: natsconn.RoleController, ID: "test", User: "controller", Password: ctrlPass,
		TLS: co.TLS,
	})
	if err != nil {
		t.Fatalf("controller-role connection: %v", err)
	}
	defer ctrlNC.Close()
	ctrlJS, err := jetstream.New(ctrlNC)
	if err != nil {
		t.Fatal(err)
	}
	bodyCtx, cancelBody := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelBody()
	body := bytes.Repeat([]byte("j"), 3<<20)
	if store, err := ctrlJS.ObjectStore(bodyCtx, queue.JobsBucket); err != nil {
		t.Fatalf("jobs store with the controller role: %v", err)
	} else if _, err := store.PutBytes(bodyCtx, "job-body", body); err != nil {
		t.Fatalf("store a job body with the controller role: %v", err)
	}
	store, err := js.ObjectStore(bodyCtx, queue.JobsBucket)
	if err != nil {
		t.Fatalf("jobs store with the worker role: %v", err)
	}
	if got, err := store.GetBytes(bodyCtx, "job-body"); err != nil || !bytes.Equal(got, body) {
		t.Errorf("the worker role read %d bytes of a %d-byte job body: %v", len(got), len(body), err)
	}
	forgeCtx, cancelForge := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelForge()
	if _, err := store.PutBytes(forgeCtx, "forged-job", []byte("{}")); err == nil {
		t.Error("the worker role stored a job body")
	}
	if ctrlStore, err := ctrlJS.ObjectStore(bodyCtx, queue.JobsBucket); err != nil {
		t.Fatal(err)
	} else if _, err := ctrlStore.GetInfo(bodyCtx, "forged-job"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the worker role's job body: %v, want none stored", err)
	}
	if _, errOut, code := c.cli("events", id); code != 0 {
		t.Errorf("events after the refused delete: exit %d: %s", code, errOut)
	}

	// A client that does not trust the server's CA is told which file to set.
	op := c.cliEnv
	c.cliEnv = []string{"DROVER_NATS_USER=operator", "DROVER_NATS_PASSWORD=" + opPass,
		"DROVER_NATS_TLS_CERT_FILE=" + pki.ClientCert, "DROVER_NATS_TLS_KEY_FILE=" + pki.ClientKey}
	_, errOut, code = c.cli("status")
	c.cliEnv = op
	if code == 0 || !strings.Contains(errOut, "signed by an authority this client does not trust") || !strings.Contains(errOut, "set nats.tls.ca_file") {
		t.Errorf("status without the CA: exit %d: %s", code, errOut)
	}

	// Nothing the fleet did was refused, and no secret reached a log.
	w.stop()
	c.ctrl.stop()
	for _, p := range []*proc{c.ctrl, w, nocreds} {
		log := readLog(p)
		if strings.Contains(strings.ToLower(log), "permissions violation") {
			t.Errorf("%s hit a permission violation: the recommended permissions are not enough", p.name)
		}
		for _, secret := range []string{ctrlPass, opPass, workerSeed} {
			if strings.Contains(log, secret) {
				t.Errorf("%s logged a secret", p.name)
			}
		}
	}
}

// TestSecureDocsEmbedPermissions: docs/security.md shows the permissions the
// test above runs with, verbatim.
func TestSecureDocsEmbedPermissions(t *testing.T) {
	t.Parallel()
	perms, err := os.ReadFile("../examples/nats/permissions.conf")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```\n"+string(perms)+"```\n") {
		t.Error("docs/security.md does not embed examples/nats/permissions.conf verbatim in a code block: copy the file into it")
	}
}

func waitViolation(t *testing.T, msgs <-chan string, subject string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-msgs:
			if strings.Contains(strings.ToLower(m), "permissions violation") && strings.Contains(m, `"`+subject+`"`) {
				return
			}
		case <-deadline:
			t.Fatalf("no permission violation for %s", subject)
		}
	}
}

// recordHandler sends each log record's message and attributes to msgs.
type recordHandler struct {
	msgs chan<- string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	select {
	case h.msgs <- b.String():
	default:
	}
	return nil
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSecureExampleServerConfig: examples/nats/server.conf, with its paths
// pointed at real files, is a configuration the embedded server accepts.
func TestSecureExampleServerConfig(t *testing.T) {
	// Not parallel: the example reads passwords from the environment.
	dir := t.TempDir()
	natstest.NewPKI(t, dir) // ca.pem, server-cert.pem, server-key.pem, as the example names them
	for _, name := range []string{"server.conf", "permissions.conf"} {
		b, err := os.ReadFile("../examples/nats/" + name)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(dir, name), strings.ReplaceAll(string(b), "/etc/drover/nats/", dir+"/"))
	}
	t.Setenv("DROVER_CONTROLLER_PASSWORD", "c")
	t.Setenv("DROVER_OPERATOR_PASSWORD", "o")
	o, err := natsconn.ServerOptions(natsconn.EmbeddedOptions{StoreDir: filepath.Join(dir, "nats"), Port: -1, ConfigFile: filepath.Join(dir, "server.conf")})
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil || len(o.Users) != 2 || len(o.Nkeys) != 1 || o.Nkeys[0].Permissions == nil {
		t.Errorf("example config: TLS %v, users %d, nkeys %d", o.TLSConfig != nil, len(o.Users), len(o.Nkeys))
	}
}
