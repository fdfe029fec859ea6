package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// A worker gives an attempt's slot to its next job once the attempt's CLI
// and checks have ended, and the attempt finishes (push, report) in one of
// as many finishing places as the worker has slots. The remote here holds
// every push in a pre-receive hook until the test lets it go: a one-slot
// worker runs the second task's CLI while the first task's push waits, and
// no more — the second attempt, finding the finishing place taken, keeps
// the slot through its own push, so the third task is not claimed. Let go,
// every push lands and the flow succeeds.
func TestSlotFreedWhilePushing(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 1, "DROVER_WORKER_RUNTIMES=demo")
	repo := newRepo(t)
	dir := t.TempDir()
	hold, pushing := filepath.Join(dir, "hold"), filepath.Join(dir, "pushing")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(pushing, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := "#!/bin/sh\ntouch '" + pushing + "'/$$\nwhile [ -e '" + hold + "' ]; do sleep 0.05; done\n"
	if err := os.WriteFile(filepath.Join(repo, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	flowFile := writeFlow(t, `
name: finishing
repo: `+repo+`
base: main
runtime: demo
max_parallel: 3
tasks:
  - id: a
    prompt: "@write a.txt from a"
  - id: b
    prompt: "@write b.txt from b"
  - id: c
    prompt: "@write c.txt from c"
`)
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)

	waitFor(t, 2*time.Minute, "two pushes waiting in the remote's hook", func() bool {
		entries, _ := os.ReadDir(pushing)
		return len(entries) >= 2
	})
	evs := c.events(id)
	if n := len(ofType(evs, event.RuntimeExited, "")); n != 2 {
		t.Errorf("%d CLIs ran before the first push landed, want 2 (the slot's and the finishing place's)", n)
	}
	// The slot is the second attempt's, in its push: nothing more is claimed
	// while the pushes wait.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n := len(ofType(c.events(id), event.AttemptClaimed, "")); n != 2 {
			t.Fatalf("%d attempts claimed while two pushes wait, want 2", n)
		}
	}
	if n := len(ofType(c.events(id), event.AttemptReported, "")); n != 0 {
		t.Errorf("%d attempts reported before their push landed", n)
	}

	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	st := c.waitFlow(id, 2*time.Minute, drovertype.FlowSucceeded)
	for _, task := range st.Detail.Tasks {
		if task.State != drovertype.TaskSucceeded {
			t.Errorf("task %s: %s", task.ID, task.State)
			continue
		}
		if got := files(t, repo, task.ResultBranch); len(got) != 2 {
			t.Errorf("branch of %s has %v", task.ID, got)
		}
	}
}
