package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
)

// TestBuiltinRuntimesWithFakeCLIs runs the built-in runtimes' exact argv
// against the demo agent impersonating each CLI (a symlink named like the
// CLI), replaying the real recorded transcripts: a success pushes the file
// the CLI wrote, and the recorded 401 and 429 failures are classified from
// the output, including pi's, which exits 0 on both.
func TestBuiltinRuntimesWithFakeCLIs(t *testing.T) {
	t.Parallel()
	clis := map[string]string{"claude-code": "claude", "codex": "codex", "opencode": "opencode", "kilo": "kilo",
		"gemini": "gemini", "pi": "pi", "copilot": "copilot"}
	// Each runtime's 429 cools it down (docs/design.md#cooldowns) for what
	// the recording says, up to a minute: its other tasks would wait for
	// it. This test is about classification: a second at most.
	env := append(personaEnv(t, clis), "DROVER_COOLDOWN_MAX=1s")
	c := startController(t, env...)
	c.startWorker("worker-1", 4, env...)
	repo := newRepo(t)

	var tasks strings.Builder
	type want struct {
		state  drovertype.TaskState
		class  drovertype.ErrorClass
		status int
	}
	wants := map[string]want{}
	for runtime := range clis {
		for _, cs := range []string{"success", "fail-401", "fail-429"} {
			id := runtime + "-" + cs
			fmt.Fprintf(&tasks, "  - id: %s\n    runtime: %s\n    prompt: \"create hello.txt containing hi\\n@case %s\"\n", id, runtime, cs)
			switch cs {
			case "success":
				wants[id] = want{state: drovertype.TaskSucceeded}
			case "fail-401":
				wants[id] = want{drovertype.TaskFailed, "AUTH_FAILED", 401}
			case "fail-429":
				wants[id] = want{drovertype.TaskFailed, "RATE_LIMITED", 429}
			}
		}
	}
	// One attempt each: this test is about classification, not retries.
	flowFile := writeFlow(t, "name: personas\nrepo: "+repo+"\nbase: main\nretry: {max_attempts: 1}\ntasks:\n"+tasks.String())
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1 (some tasks fail)\n%s\n%s", code, out, errOut)
	}
	st := c.status(submittedID(t, out))
	attempts := map[string]*projection.Attempt{}
	for _, a := range st.Detail.Attempts {
		attempts[a.Task] = a
	}
	for _, task := range st.Detail.Tasks {
		w := wants[task.ID]
		a := attempts[task.ID]
		if task.State != w.state {
			t.Errorf("%s: state %s, want %s (error %+v)", task.ID, task.State, w.state, task.Error)
			continue
		}
		if w.state == drovertype.TaskSucceeded {
			if got := show(t, repo, task.ResultBranch, "hello.txt"); got != "hi" {
				t.Errorf("%s: hello.txt = %q", task.ID, got)
			}
			if a.Report == nil || a.Report.FinalText == "" || a.Report.EventsObject == "" {
				t.Errorf("%s: no final text or parsed events in the report: %+v", task.ID, a.Report)
			}
			continue
		}
		e := a.Report.Error
		if e == nil || e.Class != w.class || e.Status != w.status {
			t.Errorf("%s: error %+v, want %s with status %d", task.ID, e, w.class, w.status)
		}
		// A CLI that failed changed nothing worth keeping: no branch.
		if a.Report.Branch != "" || git(t, repo, "for-each-ref", "refs/heads/"+a.Branch) != "" {
			t.Errorf("%s: the failed attempt pushed %s", task.ID, a.Branch)
		}
	}
	// copilot's stream states no tokens: unknown, not 0.
	if u := attempts["copilot-success"].Report.Usage; u == nil || u.InputTokens != nil || u.OutputTokens != nil || u.Model != "mock-model" {
		t.Errorf("copilot usage %+v, want the model and no token counts", u)
	}
	// Token usage from claude's own result line (2 model calls, summed), and
	// the tool call it made.
	if r := attempts["claude-code-success"].Report; r.Usage == nil || r.Usage.InputTokens == nil || *r.Usage.InputTokens != 38432 ||
		r.Usage.OutputTokens == nil || *r.Usage.OutputTokens != 24 || r.ToolCalls["Write"] != 1 {
		t.Errorf("claude usage %+v, tool calls %v", r.Usage, r.ToolCalls)
	}
}
