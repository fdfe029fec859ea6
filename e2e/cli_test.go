package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIReadCommands checks logs, diff and watch against a real flow: logs
// of a finished attempt (from the object store) and of a running one (-f
// from the OUTPUT stream), the patch, and watch on a finished flow.
func TestCLIReadCommands(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2, "DROVER_WORKER_RUNTIMES=demo")
	repo := newRepo(t)

	out, errOut, code := c.cli("submit", writeFlow(t, `
name: cli
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: greet
    prompt: |
      @stdout hello from the agent
      @write a.txt x
`), "--watch")
	if code != 0 {
		t.Fatalf("submit --watch: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)

	out, errOut, code = c.cli("logs", id+"/greet")
	if code != 0 || !strings.Contains(out, "hello from the agent") {
		t.Errorf("logs %s/greet: exit %d, want the agent's stdout:\n%s\n%s", id, code, out, errOut)
	}
	out, errOut, code = c.cli("logs", id+"_greet_1", "-o", "json")
	if code != 0 {
		t.Errorf("logs -o json: exit %d: %s", code, errOut)
	}
	var text strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ch struct {
			Stream string `json:"stream"`
			Offset int64  `json:"offset"`
			Text   string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("logs -o json: line %q: %v", line, err)
		}
		text.WriteString(ch.Text)
	}
	if !strings.Contains(text.String(), "hello from the agent") {
		t.Errorf("logs -o json text lacks the agent's stdout:\n%s", out)
	}

	out, errOut, code = c.cli("diff", id+"/greet")
	if code != 0 || !strings.Contains(out, "a.txt") || !strings.Contains(out, "+x") {
		t.Errorf("diff: exit %d, want a patch adding a.txt:\n%s\n%s", code, out, errOut)
	}
	out, _, code = c.cli("diff", id+"/greet", "-o", "json")
	var d struct{ Attempt, Stat, Patch string }
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || d.Attempt != id+"_greet_1" || !strings.Contains(d.Patch, "+x") {
		t.Errorf("diff -o json: exit %d, %v: %+v", code, err, d)
	}

	out, errOut, code = c.cli("watch", id)
	if code != 0 || !strings.Contains(out, "greet") || !strings.Contains(out, "succeeded") || strings.Contains(out, "\x1b[") {
		t.Errorf("watch of a finished flow: exit %d, want plain lines with the final state:\n%q\n%s", code, out, errOut)
	}

	// Targets that do not exist are not found (3); a flow where an attempt
	// is wanted is bad input (2). docs/cli.md has the table.
	for target, want := range map[string]int{id + "/nope": 3, id + "_greet_9": 3, "no-such-flow/greet": 3, id: 2} {
		if _, errOut, code := c.cli("logs", target); code != want {
			t.Errorf("logs %s: exit %d, want %d (%s)", target, code, want, errOut)
		}
	}

	// logs -f on a running attempt prints its output live and ends with it.
	out, errOut, code = c.cli("submit", writeFlow(t, `
name: slow
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: slow
    prompt: |
      @stdout early
      @sleep 3s
      @stdout late
`))
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	slow := submittedID(t, out)
	waitFor(t, 30*time.Second, "the slow attempt to start", func() bool {
		st := c.status(slow)
		return len(st.Detail.Attempts) > 0 && st.Detail.Attempts[0].Worker != ""
	})
	began := time.Now()
	out, errOut, code = c.cli("logs", slow+"/slow", "-f")
	if code != 0 || !strings.Contains(out, "early") || !strings.Contains(out, "late") {
		t.Errorf("logs -f: exit %d, want early and late:\n%s\n%s", code, out, errOut)
	}
	if st := c.status(slow); st.Detail.Attempts[0].Report == nil {
		t.Errorf("logs -f returned after %s, before the attempt reported", time.Since(began))
	}

	// Shell completion asks the live controller for ids.
	complete := func(args ...string) string {
		cmd := exec.Command(filepath.Join(bin, "controller"), append([]string{"__complete", "--data-dir", c.dataDir}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		return string(out)
	}
	if got := complete("status", ""); !strings.Contains(got, id+"\t") || !strings.Contains(got, slow+"\t") {
		t.Errorf("completion of status lacks the flows:\n%s", got)
	}
	if got := complete("logs", id+"/"); !strings.Contains(got, id+"/greet\tsucceeded") {
		t.Errorf("completion of logs FLOW/ lacks the task:\n%s", got)
	}
	if got := complete("cancel", id+"_"); !strings.Contains(got, id+"_greet_1\t") {
		t.Errorf("completion of cancel FLOW_ lacks the attempt:\n%s", got)
	}
}
