package e2e

import (
	"context"
	"github.com/drover-dev/drover/internal/objstore"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
)

// TestSecretsRedacted: a CLI that prints its API key to stdout and stderr
// and writes it into a file leaks it into no event, no output chunk and no
// worker log line; a variable outside the allowlist never reaches the CLI.
func TestSecretsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-e2e-supersecret-0123456789"
	env := []string{
		"DEMO_API_KEY=" + secret,
		"UNLISTED_TOKEN=must-not-reach-the-cli",
		"DROVER_RUNTIMES_LEAKY_BINARY=/bin/sh",
		"DROVER_RUNTIMES_LEAKY_ARGS=-c",
		"DROVER_RUNTIMES_LEAKY_INPUT=arg",
		"DROVER_RUNTIMES_LEAKY_VERSION_ARGS=-c,true",
		"DROVER_RUNTIMES_LEAKY_ENV_PASSTHROUGH=DEMO_API_KEY",
	}
	c := startController(t, env...)
	w := c.startWorker("worker-1", 1, append(env, "DROVER_WORKER_RUNTIMES=leaky")...)
	repo := newRepo(t)
	script := `echo "key=$DEMO_API_KEY"; echo "stderr key $DEMO_API_KEY" >&2; echo "$DEMO_API_KEY" > leaked.txt; echo "unlisted=${UNLISTED_TOKEN:-absent}"; exit 4`
	flowFile := writeFlow(t, "name: leaky\nrepo: "+repo+"\nruntime: leaky\ntasks:\n  - id: leak\n    prompt: '"+script+"'\n")
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	// The report whole, stdout tail included, as an operator reads it.
	rep := c.report(id + "/leak")
	if !strings.Contains(rep.StdoutTail, "key=[REDACTED]") || !strings.Contains(rep.StderrTail, "stderr key [REDACTED]") {
		t.Errorf("report tails not masked: %+v", rep)
	}
	if text, _, _ := c.cli("report", id+"/leak"); !strings.Contains(text, "--- stdout (tail) ---\nkey=[REDACTED]") {
		t.Errorf("report's text has no masked stdout tail:\n%s", text)
	}
	if !strings.Contains(rep.StdoutTail, "unlisted=absent") {
		t.Errorf("a variable outside the allowlist reached the CLI: %q", rep.StdoutTail)
	}

	events, _, _ := c.cli("events", id, "-o", "json")
	if strings.Contains(events, secret) {
		t.Errorf("the secret is in the flow's events")
	}
	if !strings.Contains(events, "[REDACTED]") {
		t.Errorf("no masked value in the events (the diff of leaked.txt should show one)")
	}
	// The live output stream.
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, queue.OutputStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"drover.output." + id + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	var chunks strings.Builder
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			break
		}
		chunks.Write(msg.Data())
	}
	if chunks.Len() == 0 || strings.Contains(chunks.String(), secret) || !strings.Contains(chunks.String(), "[REDACTED]") {
		t.Errorf("output chunks: %s", chunks.String())
	}
	// The full log and the patch in the object store are masked too.
	for _, name := range []string{rep.LogObject, rep.PatchObject} {
		if name == "" {
			t.Errorf("report names no artifact: %+v", rep)
			continue
		}
		rc, err := objstore.NewArtifacts(js).Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(b), secret) || !strings.Contains(string(b), "[REDACTED]") {
			t.Errorf("artifact %s: %q", name, b)
		}
	}
	if rep.LogBytes == 0 {
		t.Errorf("log size not recorded")
	}
	w.stop()
	logs, _ := os.ReadFile(w.log)
	if strings.Contains(string(logs), secret) {
		t.Errorf("the secret is in the worker's log")
	}
}
