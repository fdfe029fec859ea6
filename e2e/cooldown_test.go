package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// startFleet starts workers of slots each and waits until all of them claim:
// a fleet already at work when the flow comes, so that the first attempts
// fill every slot before the first limit arrives.
func (c *cluster) startFleet(slots int, names []string, env ...string) {
	c.t.Helper()
	var ws []*proc
	for _, name := range names {
		ws = append(ws, c.startWorker(name, slots, env...))
	}
	for _, w := range ws {
		w.waitLog(time.Minute, "worker running")
	}
}

// limitedFlow is a flow of n tasks on runtime, each of whose first attempt
// meets a rate limit: the opencode fake prints the error line of
// opencode/fail-429 with a Retry-After of wait and exits 1, as the real
// CLI does; later attempts succeed. extra goes into every task.
func limitedFlow(name, repo, runtime string, n int, wait time.Duration, extra string) string {
	secs := int(wait / time.Second)
	errLine := fmt.Sprintf(`{"type":"error","error":{"name":"APIError","data":{"message":"Rate limit reached for requests (mockllm). Please try again in %ds.","statusCode":429,"isRetryable":true,"responseHeaders":{"retry-after":"%d"}}}}`, secs, secs)
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nrepo: %s\nbase: main\nruntime: %s\nretry: {max_attempts: 3, initial_backoff: 1s, jitter: 0}\ntasks:\n", name, repo, runtime)
	for i := range n {
		fmt.Fprintf(&b, "  - id: t%d\n%s    prompt: |\n      create hello.txt containing hi\n      @on-attempt 1 @stdout %s\n      @on-attempt 1 @exit 1\n", i, extra, errLine)
	}
	return b.String()
}

// attemptsOf returns each attempt of a flow by id, from its status.
func attemptsOf(st *controller.StatusResponse) map[string]*projection.Attempt {
	out := map[string]*projection.Attempt{}
	for _, a := range st.Detail.Attempts {
		out[a.ID] = a
	}
	return out
}

// classOf is the class an attempt ended with, "" for none.
func classOf(a *projection.Attempt) drovertype.ErrorClass {
	switch {
	case a.Error != nil:
		return a.Error.Class
	case a.Report != nil && a.Report.Error != nil:
		return a.Report.Error.Class
	}
	return ""
}

// limitStory checks, from a flow's log, what a cooldown promises: the
// attempts that met the limit all started (were claimed) before the first
// cooldown_started was recorded — no attempt started on the runtime after
// the limit was known — and their number is at most the slots, the
// attempts that could run at once. It returns them and the first
// cooldown's payload.
func limitStory(t *testing.T, evs []*event.Event, st *controller.StatusResponse, runtime string, slots int) ([]string, event.CooldownStartedData) {
	t.Helper()
	first := -1
	var cd event.CooldownStartedData
	claimed := map[string]int{} // attempt -> position of its first claim in the log
	for i, ev := range evs {
		switch ev.Type {
		case event.CooldownStarted:
			var d event.CooldownStartedData
			if err := ev.Payload(&d); err != nil {
				t.Fatal(err)
			}
			if first < 0 && d.Scope == event.CooldownRuntime && d.Name == runtime {
				first, cd = i, d
			}
		case event.AttemptClaimed:
			if _, ok := claimed[ev.Attempt]; !ok {
				claimed[ev.Attempt] = i
			}
		}
	}
	if first < 0 {
		t.Fatalf("no cooldown_started for %s in the log", runtime)
	}
	var limited []string
	for id, a := range attemptsOf(st) {
		if classOf(a) != drovertype.ClassRateLimited {
			continue
		}
		limited = append(limited, id)
		if at, ok := claimed[id]; !ok || at > first {
			t.Errorf("attempt %s met the limit but started after the cooldown was recorded (claim at %d, cooldown at %d)", id, at, first)
		}
	}
	if len(limited) == 0 || len(limited) > slots {
		t.Errorf("%d attempts met the limit, want 1 to %d (those running when it arrived): %v", len(limited), slots, limited)
	}
	return limited, cd
}

// TestCooldownFleet: 50 tasks on one runtime, each first attempt of which
// meets a rate limit with a Retry-After of 3s. Only the attempts already
// running when the first limit arrived meet it (counted from the log); the
// queued ones are withdrawn before they run, the tasks wait for the
// cooldown, one attempt probes it once it ends, and the flow succeeds.
func TestCooldownFleet(t *testing.T) {
	t.Parallel()
	env := append(personaEnv(t, map[string]string{"opencode": "opencode"}), "OPENAI_API_KEY=sk-e2e-cooldown-0123456789")
	c := startController(t, env...)
	c.startFleet(3, []string{"worker-1", "worker-2"}, env...)
	repo := newRepo(t)
	id := c.submit(limitedFlow("fleet", repo, "opencode", 50, 3*time.Second, ""))
	st := c.waitFlow(id, 5*time.Minute, drovertype.FlowSucceeded)
	evs := c.events(id)
	limited, cd := limitStory(t, evs, st, "opencode", 6)
	t.Logf("%d of 50 first attempts met the limit (%d in flight when it arrived); cooldown %s to %s (%s)",
		len(limited), cd.InFlight, cd.From.Format(time.TimeOnly), cd.Until.Format(time.TimeOnly), cd.Source)
	if cd.Source != event.CooldownRetryAfter || cd.Until.Sub(cd.From) != 3*time.Second {
		t.Errorf("cooldown %+v, want the 3s the CLI asked for", cd)
	}

	var withdrawn, probes int
	credential := ""
	for _, a := range attemptsOf(st) {
		switch {
		case a.State == drovertype.AttemptWithdrawn:
			withdrawn++
		case len(a.Probe) > 0:
			probes++
		}
		if a.Report != nil && a.Report.Credential != "" {
			credential = a.Report.Credential
		}
	}
	// Every task's first attempt either met the limit or was withdrawn
	// before it ran, and one attempt probed each time the cooldown ended.
	if withdrawn+len(limited) != 50 || probes < 1 {
		t.Errorf("%d withdrawn + %d limited, want 50; %d probes", withdrawn, len(limited), probes)
	}
	if len(credential) != 12 || strings.Contains("sk-e2e-cooldown-0123456789", credential) {
		t.Errorf("credential fingerprint %q", credential)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), "sk-e2e-cooldown") {
			t.Errorf("the key is in event %s", ev.ID)
		}
	}
	if n := len(ofType(evs, event.TaskWaiting, "")); n == 0 {
		t.Error("no task said it waited")
	}
	if n := len(ofType(evs, event.CooldownReleased, "")); n == 0 {
		t.Error("no cooldown released")
	}
	c.rebuildEqual()
}

// TestCooldownFallback: the same, with a fallback runtime: tasks do not
// wait for the cooldown but move to codex at once — those that met the
// limit by the retry policy, the queued ones withdrawn and started there —
// and no attempt starts on opencode again.
func TestCooldownFallback(t *testing.T) {
	t.Parallel()
	env := personaEnv(t, map[string]string{"opencode": "opencode", "codex": "codex"})
	c := startController(t, env...)
	c.startFleet(3, []string{"worker-1", "worker-2"}, env...)
	repo := newRepo(t)
	id := c.submit(limitedFlow("fallback", repo, "opencode", 50, 30*time.Second, "    retry: {fallback: [codex]}\n"))
	st := c.waitFlow(id, 5*time.Minute, drovertype.FlowSucceeded)
	evs := c.events(id)
	limited, cd := limitStory(t, evs, st, "opencode", 6)
	if n := len(ofType(evs, event.TaskWaiting, "")); n != 0 {
		t.Errorf("%d task_waiting events: a task with a fallback does not wait", n)
	}
	onCodex := 0
	for _, task := range st.Detail.Tasks {
		a := attemptsOf(st)[task.Attempt]
		if a == nil || a.Runtime != "codex" || a.State != drovertype.AttemptSucceeded {
			t.Errorf("task %s ended on %+v, want a success on codex", task.ID, a)
			continue
		}
		onCodex++
		// Moved at once: scheduled while opencode was still cooling down.
		if !a.ScheduledAt.Before(cd.Until) {
			t.Errorf("task %s started on codex at %s, after the cooldown ended (%s)", task.ID, a.ScheduledAt, cd.Until)
		}
	}
	for _, a := range attemptsOf(st) {
		if a.Runtime == "opencode" && a.N > 1 {
			t.Errorf("attempt %s ran on opencode after the limit", a.ID)
		}
	}
	t.Logf("%d first attempts met the limit; %d tasks succeeded on codex", len(limited), onCodex)
	c.rebuildEqual()
}

// TestCooldownControllerRestart: the controller is killed (SIGKILL) while
// a cooldown holds its runtime back. The restarted one finds the cooldown
// in the log — status shows the same end and cause — starts nothing on the
// runtime before it ends, then lets one attempt probe it; the flow
// succeeds and a rebuild agrees with the live projection.
func TestCooldownControllerRestart(t *testing.T) {
	t.Parallel()
	env := personaEnv(t, map[string]string{"opencode": "opencode"})
	c := startController(t, env...)
	c.startFleet(2, []string{"worker-1"}, env...)
	repo := newRepo(t)
	id := c.submit(limitedFlow("restart", repo, "opencode", 6, 20*time.Second, ""))
	// The cooldown, once every attempt that was running when it began
	// has met the limit too and pushed its end.
	var before controller.CooldownStatus
	waitFor(t, time.Minute, "a cooldown", func() bool {
		st := c.status(id)
		for _, cd := range st.Cooldowns {
			if cd.Key == "runtime:opencode" {
				before = cd
				return cd.Limited == 1+cd.InFlight
			}
		}
		return false
	})
	out, _, code := c.cli("runtime", "health")
	if code != 0 || !strings.Contains(out, "runtime:opencode") || !strings.Contains(out, "cooling") {
		t.Errorf("runtime health: exit %d\n%s", code, out)
	}
	c.restartController(true)
	c.ctrl.waitLog(time.Minute, "controller serving")
	// Once the restarted controller has refolded what the killed one had
	// not committed, it shows the same cooldown: it lives in the log. On a
	// machine so loaded that the restart outlasts the cooldown there is
	// nothing left to show; what follows still checks that nothing ran on
	// the runtime before its end.
	var after controller.CooldownStatus
	shown := false
	deadline := time.Now().Add(30 * time.Second)
	for !shown && time.Now().Before(before.Until) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for the restarted controller to show the cooldown (%+v)", before)
		}
		for _, cd := range c.status(id).Cooldowns {
			if cd.Key == before.Key {
				after = cd
			}
		}
		shown = after.Until.Equal(before.Until) && after.Limited == before.Limited
		if !shown {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if shown {
		if after.Cause != before.Cause || !after.StartedAt.Equal(before.StartedAt) || after.State != controller.CooldownCooling {
			t.Errorf("after the restart: %+v, before: %+v", after, before)
		}
		if text, _, _ := c.cli("status", id); time.Now().Before(before.Until) &&
			(!strings.Contains(text, "runtime:opencode") || !strings.Contains(text, "waits: ")) {
			t.Errorf("status does not show the cooldown and the waiting tasks:\n%s", text)
		}
	} else {
		t.Logf("the restart outlasted the cooldown (it ended %s): its status after the restart is not checked", before.Until)
	}
	st := c.waitFlow(id, 3*time.Minute, drovertype.FlowSucceeded)
	// Nothing started on opencode while it cooled down, whichever
	// controller decided: every attempt scheduled after the cooldown
	// began, before its end, was withdrawn before it ran.
	until := before.Until
	for _, cd := range st.Cooldowns {
		t.Errorf("cooldown left unreleased: %+v", cd)
	}
	for _, ev := range c.events(id) {
		if ev.Type != event.CooldownStarted {
			continue
		}
		var d event.CooldownStartedData
		if err := ev.Payload(&d); err == nil && d.Scope == event.CooldownRuntime && d.Until.After(until) {
			until = d.Until
		}
	}
	for _, a := range attemptsOf(st) {
		if a.ScheduledAt.After(before.StartedAt) && a.ScheduledAt.Before(until) && a.State != drovertype.AttemptWithdrawn {
			t.Errorf("attempt %s was scheduled at %s, during the cooldown (%s to %s), and %s", a.ID, a.ScheduledAt, before.StartedAt, until, a.State)
		}
	}
	c.rebuildEqual()
}

// TestBudgetStopsFlow: a flow's token budget is reached part-way. The
// attempt running then is stopped, the tasks left end as BUDGET_EXCEEDED
// (or blocked behind one), and status shows the spend against the budget.
// Retry is refused until `controller budget` raises it; then `controller
// retry FLOW` resumes, and the flow succeeds.
func TestBudgetStopsFlow(t *testing.T) {
	t.Parallel()
	c := startController(t)
	c.startWorker("worker-1", 2)
	repo := newRepo(t)
	// What one task of this shape spends, as the demo agent reports it.
	calib := c.submit(budgetFlow("calib", repo, 1, 0))
	st := c.waitFlow(calib, 2*time.Minute, drovertype.FlowSucceeded)
	per := st.Detail.Spend.Tokens
	if per <= 0 {
		t.Fatalf("the demo agent reported %d tokens", per)
	}

	// Budget for two and a half tasks: the third's report reaches it.
	budget := per*5/2 + 1
	id := c.submit(budgetFlow("spend", repo, 8, budget))
	st = c.waitFlow(id, 3*time.Minute, drovertype.FlowFailed)
	var succeeded, exceeded, blocked int
	for _, task := range st.Detail.Tasks {
		switch {
		case task.State == drovertype.TaskSucceeded:
			succeeded++
		case task.State == drovertype.TaskFailed && task.Error.Class == drovertype.ClassBudgetExceeded:
			exceeded++
		case task.State == drovertype.TaskBlocked:
			blocked++
		default:
			t.Errorf("task %s: %s %+v", task.ID, task.State, task.Error)
		}
	}
	if succeeded < 3 || succeeded > 4 || exceeded == 0 || succeeded+exceeded+blocked != 10 {
		t.Errorf("%d succeeded, %d BUDGET_EXCEEDED, %d blocked, want 3 or 4 and the rest", succeeded, exceeded, blocked)
	}
	// The slow task ran when the budget was reached: it was stopped.
	if a := attemptsOf(st)[drovertype.AttemptID(id, "slow", 1)]; a == nil || classOf(a) != drovertype.ClassCancelled {
		t.Errorf("the slow task's attempt: %+v, want it stopped (CANCELLED)", a)
	}
	if s := st.Detail.Spend; s == nil || s.Tokens < budget || s.Reached == "" {
		t.Errorf("spend %+v against %d", s, budget)
	}
	text, _, _ := c.cli("status", id)
	if !strings.Contains(text, fmt.Sprintf("of budget %d tokens: REACHED", budget)) {
		t.Errorf("status does not show spend against budget:\n%s", text)
	}
	if _, errOut, code := c.cli("retry", id); code != 2 || !strings.Contains(errOut, "budget reached") {
		t.Errorf("retry over budget: exit %d: %s", code, errOut)
	}
	out, errOut, code := c.cli("budget", id, "--tokens", fmt.Sprint(per*100), "--reason", "worth it")
	if code != 0 || !strings.Contains(out, "controller retry "+id) {
		t.Fatalf("budget: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = c.cli("retry", id, "-o", "json")
	var resp controller.OperatorResponse
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || !strings.HasPrefix(resp.Message, "retrying ") {
		t.Fatalf("retry: exit %d\n%s%s", code, out, errOut)
	}
	st = c.waitFlow(id, 3*time.Minute, drovertype.FlowSucceeded)
	if st.Detail.Flow.Round == 0 || st.Detail.Flow.Budget.Tokens != per*100 {
		t.Errorf("flow round %d, budget %+v", st.Detail.Flow.Round, st.Detail.Flow.Budget)
	}
	c.rebuildEqual()
}

// budgetFlow is n quick tasks of the same size, and (with a budget) a slow
// one that runs beside them and one that depends on the last, with at most
// two attempts at once.
func budgetFlow(name, repo string, n int, budget int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nrepo: %s\nbase: main\nruntime: demo\nmax_parallel: 2\n", name, repo)
	if budget > 0 {
		fmt.Fprintf(&b, "budget: {tokens: %d}\n", budget)
	}
	b.WriteString("tasks:\n")
	if budget > 0 {
		b.WriteString("  - {id: slow, prompt: \"@on-attempt 1 @sleep 60s\\n@write slow.txt done\"}\n")
	}
	for i := range n {
		fmt.Fprintf(&b, "  - {id: q%d, prompt: \"@write q%d.txt the same size\"}\n", i, i)
	}
	if budget > 0 {
		fmt.Fprintf(&b, "  - {id: after, depends_on: [q%d], prompt: \"@write after.txt x\"}\n", n-1)
	}
	return b.String()
}

// TestCooldownWindow is issue 27's scenario: a provider refuses every
// request for a window, whichever attempt makes it, and 20 tasks on 2
// workers × 4 slots, under the default retry policy (3 attempts), meet it.
// The attempts running when the first limit arrives meet it; the queued
// ones are withdrawn; half-open probes back off (the fake's 429 asks for
// 2s, doubled at each probe that meets it) until the window has passed.
// Probes meet the limit too, and a task's first attempt and two probes
// used up its 3 attempts: the flow failed RATE_LIMITED though every
// attempt after the window succeeded. An attempt that meets a rate limit
// uses none now, and the flow succeeds.
//
// The window is 30s from the submission. The first task in order is each
// probe (its retry is due when the cooldown ends: both wait what the CLI
// asked), so it meets the limit at about 0, 2, 6, 14 and perhaps 30s: three
// times by the second probe. cooldown.max 20s shortens only the wait for
// the probe after the window (40s otherwise).
func TestCooldownWindow(t *testing.T) {
	t.Parallel()
	env := personaEnv(t, map[string]string{"opencode": "opencode"})
	c := startController(t, append(env, "DROVER_COOLDOWN_MAX=20s")...)
	c.startFleet(4, []string{"worker-1", "worker-2"}, env...)
	repo := newRepo(t)
	end := time.Now().Add(30 * time.Second).Truncate(time.Second)
	errLine := `{"type":"error","error":{"name":"APIError","data":{"message":"Rate limit reached for requests (mockllm). Please try again in 2s.","statusCode":429,"isRetryable":true,"responseHeaders":{"retry-after":"2"}}}}`
	var b strings.Builder
	fmt.Fprintf(&b, "name: window\nrepo: %s\nbase: main\nruntime: opencode\ntasks:\n", repo)
	for i := range 20 {
		fmt.Fprintf(&b, "  - id: t%d\n    prompt: |\n      create hello.txt containing hi\n      @before %d @stdout %s\n      @before %d @exit 1\n", i, end.Unix(), errLine, end.Unix())
	}
	id := c.submit(b.String())
	st := c.waitFlow(id, 4*time.Minute, drovertype.FlowSucceeded)
	evs := c.events(id)

	// The first cooldown, and where each attempt was first claimed.
	first, claimed := -1, map[string]int{}
	for i, ev := range evs {
		switch {
		case ev.Type == event.CooldownStarted && first < 0:
			first = i
		case ev.Type == event.AttemptClaimed:
			if _, ok := claimed[ev.Attempt]; !ok {
				claimed[ev.Attempt] = i
			}
		}
	}
	if first < 0 {
		t.Fatal("no cooldown_started in the log")
	}
	var early, probes, withdrawn int
	perTask := map[string]int{}
	for _, a := range attemptsOf(st) {
		limited := classOf(a) == drovertype.ClassRateLimited
		if limited {
			perTask[a.Task]++
		}
		at, ran := claimed[a.ID]
		switch {
		case a.State == drovertype.AttemptWithdrawn:
			withdrawn++
		case limited && ran && at < first:
			early++ // running when the first limit arrived
		case len(a.Probe) > 0:
			if a.ScheduledAt.Before(end) {
				probes++
			}
		case a.ScheduledAt.Before(end) && limited:
			t.Errorf("attempt %s met the limit in the window, started after the first limit, and was no probe", a.ID)
		}
	}
	most := 0
	for _, n := range perTask {
		most = max(most, n)
	}
	t.Logf("%d attempts limited before the first limit ended, %d withdrawn, %d probes in the window; a task met the limit %d times",
		early, withdrawn, probes, most)
	if early == 0 || early > 8 {
		t.Errorf("%d attempts met the limit before the first one ended, want 1 to 8 (the slots)", early)
	}
	if probes == 0 || probes > 6 {
		t.Errorf("%d probes during the window, want 1 to 6", probes)
	}
	// The case the issue saw: a task whose attempts met the limit more
	// often than it has attempts, and succeeded.
	if most < 3 {
		t.Errorf("no task met the limit 3 times (most: %d): the window did not test what it is for", most)
	}
	c.rebuildEqual()
}
