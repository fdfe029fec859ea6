package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
)

// TestBadInput checks that malformed flows are refused before any state
// changes, and that poison messages on Drover's subjects are parked without
// crashing anyone or being redelivered forever.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2)
	repo := newRepo(t)

	bad := writeFlow(t, `
name: bad
repo: `+repo+`
runtime: demo
tasks:
  - id: a
    prompt: x
  - id: a
    prompt: y
`)
	_, errOut, code := c.cli("submit", bad)
	if code != 2 || !strings.Contains(errOut, "flow.yaml") || !strings.Contains(errOut, "duplicate") {
		t.Errorf("duplicate task id: exit %d, stderr %q, want exit 2 naming the file and the problem", code, errOut)
	}
	unknownRuntime := writeFlow(t, "name: bad\nrepo: "+repo+"\nruntime: nosuch\ntasks:\n  - id: a\n    prompt: x\n")
	if _, errOut, code = c.cli("submit", unknownRuntime); code != 2 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("unknown runtime: exit %d, stderr %q", code, errOut)
	}
	if out, _, _ := c.cli("status"); strings.Contains(out, "bad-") {
		t.Errorf("a refused flow left state:\n%s", out)
	}

	// Poison on the wire.
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.Publish(ctx, "drover.events.junk.flow_submitted", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	// An event from a future writer (version 7).
	if _, err := js.Publish(ctx, "drover.events.junk.flow_submitted", []byte(`{"v":7,"id":"x","type":"flow_submitted","flow":"junk"}`)); err != nil {
		t.Fatal(err)
	}
	// Jobs: ids that would escape a path, a future version, and a large
	// undecodable one (parked as a prefix, with its real size).
	for _, job := range [][]byte{
		[]byte(`{"v":1,"attempt":"../../etc"}`),
		[]byte(`{"v":2,"attempt":"f_t_1","flow":"f","task":"t","n":1,"pool":"default","runtime":"demo","repo":"/r","base":"main","branch":"b"}`),
		append([]byte(`{"v":1,"prompt":"`), bytes.Repeat([]byte("A"), 900<<10)...),
	} {
		if _, err := js.Publish(ctx, queue.AttemptSubject("default", "demo"), job); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the poison events to be recorded", func() bool {
		return c.status("").Poisons == 2
	})
	dl, err := js.Stream(ctx, queue.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the poison job and event to be parked", func() bool {
		info, err := dl.Info(ctx)
		return err == nil && info.State.Msgs == 5 // the jobs, and the events the controller parked
	})
	dlOut, errOut, code := c.cli("dead-letters")
	if code != 0 || !strings.Contains(dlOut, "attempts") || !strings.Contains(dlOut, "bad job") || !strings.Contains(dlOut, `{"v":1,"attempt":"../../etc"}`) ||
		!strings.Contains(dlOut, "events") || !strings.Contains(dlOut, "{not json") || !strings.Contains(dlOut, "version 7") ||
		!strings.Contains(dlOut, "version 2") {
		t.Errorf("dead-letters (exit %d) does not list the poison job:\n%s%s", code, dlOut, errOut)
	}
	attempts, err := js.Stream(ctx, queue.AttemptsStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the poison job to leave the work queue", func() bool {
		info, err := attempts.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})

	// Everyone survived: a good flow still runs.
	good := writeFlow(t, "name: good\nrepo: "+repo+"\nruntime: demo\ntasks:\n  - id: a\n    prompt: \"@write ok.txt fine\"\n")
	out, errOut, code := c.cli("submit", good, "--watch")
	if code != 0 {
		t.Fatalf("good flow after poison: exit %d\n%s\n%s", code, out, errOut)
	}
}
