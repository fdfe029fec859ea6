package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
)

// TestBuiltinRuntimesWithFakeCLIs runs the built-in runtimes' exact argv
// against the demo agent impersonating each CLI (a symlink named like the
// CLI), replaying the real recorded transcripts: a success pushes the file
// the CLI wrote, and the recorded 401 and 429 failures are classified from
// the output, including pi's, which exits 0 on both. A 429 uses none of
// the task's one attempt: the task is retried until its rate_limit_wait is
// spent, then fails RATE_LIMITED.
func TestBuiltinRuntimesWithFakeCLIs(t *testing.T) {
	const limitWait = "2s"
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
			if cs == "fail-429" {
				// A rate limit uses none of the task's one attempt: it is
				// waited out for a little longer than a cooldown (at most a
				// second here), retries a second apart. Only these tasks
				// wait so little: the others, held back by these tasks'
				// cooldowns while a probe waits for a slot, wait as long as
				// they must.
				fmt.Fprintf(&tasks, "    retry: {max_backoff: 1s, rate_limit_wait: %s}\n", limitWait)
			}
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
	t0 := time.Now()
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1 (some tasks fail)\n%s\n%s", code, out, errOut)
	}
	t.Logf("flow: %s", time.Since(t0).Round(time.Millisecond))
	st := c.status(submittedID(t, out))
	attempts, all := map[string]*projection.Attempt{}, map[string][]*projection.Attempt{}
	for _, a := range st.Detail.Attempts {
		attempts[a.Task] = a
		all[a.Task] = append(all[a.Task], a)
	}
	most := 0
	for _, task := range st.Detail.Tasks {
		w := wants[task.ID]
		a := attempts[task.ID]
		if task.State != w.state {
			t.Errorf("%s: state %s, want %s (error %+v)", task.ID, task.State, w.state, task.Error)
			continue
		}
		if w.class == drovertype.ClassRateLimited {
			most = max(most, checkLimited(t, c, repo, task, all[task.ID], limitWait))
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
		if a.Report == nil {
			for _, a := range all[task.ID] {
				t.Logf("%s: %s %s, error %+v, report %+v", a.ID, a.State, a.Phase, a.Error, a.Report)
			}
			t.Errorf("%s: %s, error %+v, and its last attempt %s reported nothing", task.ID, task.State, task.Error, a.ID)
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
	// The case issue 27 saw: more attempts met the limit than the task
	// has, and it was retried all the same.
	if most < 2 {
		t.Errorf("no task met the limit twice (most: %d): a 429 used up the task's one attempt, or no retry came within %s", most, limitWait)
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

// checkLimited checks a task whose every model request was refused 429:
// each of its attempts that ran failed RATE_LIMITED with status 429 and
// pushed nothing, and the task failed RATE_LIMITED because it had waited
// out limits for its retry.rate_limit_wait, wait, not because its attempts
// were used up. It returns how many of its attempts met the limit.
func checkLimited(t *testing.T, c *cluster, repo string, task *projection.Task, attempts []*projection.Attempt, wait string) int {
	t.Helper()
	if e := task.Error; task.State != drovertype.TaskFailed || e == nil || e.Class != drovertype.ClassRateLimited ||
		!strings.Contains(e.Message, "retry.rate_limit_wait is "+wait) && !strings.Contains(e.Message, "past retry.rate_limit_wait ("+wait) {
		t.Errorf("%s: %s with error %+v, want failed RATE_LIMITED once retry.rate_limit_wait (%s) was spent", task.ID, task.State, task.Error, wait)
	}
	limited := 0
	for _, a := range attempts {
		if a.State == drovertype.AttemptWithdrawn {
			continue // taken back by a cooldown before it ran
		}
		if a.Report == nil {
			t.Errorf("%s: %s with error %+v and no report, want RATE_LIMITED with status 429", a.ID, a.State, a.Error)
			continue
		}
		if e := a.Report.Error; e == nil || e.Class != drovertype.ClassRateLimited || e.Status != 429 {
			rep := c.report(a.ID)
			t.Errorf("%s: error %+v, want RATE_LIMITED with status 429\nstdout:\n%s\nstderr:\n%s", a.ID, e,
				rep.StdoutTail, rep.StderrTail)
			continue
		}
		limited++
		// A CLI that failed changed nothing worth keeping: no branch.
		if a.Report.Branch != "" || git(t, repo, "for-each-ref", "refs/heads/"+a.Branch) != "" {
			t.Errorf("%s: the rate-limited attempt pushed %s", a.ID, a.Branch)
		}
	}
	t.Logf("%s: %d attempts met the limit, then: %+v", task.ID, limited, task.Error)
	return limited
}
