package console

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
)

// evID is an event with the id its writer gives it (what ev cannot
// derive: a cooldown's, a wait's, a budget's end).
func (w *world) evID(key string, typ event.Type, flowID, task, attempt string, data any) *event.Event {
	w.t.Helper()
	w.mu.Lock()
	w.now = w.now.Add(time.Second)
	now := w.now
	w.mu.Unlock()
	ev, err := event.New(drovertype.EventID(typ, key), typ, now, flowID, task, attempt, 0, data)
	if err != nil {
		w.t.Fatal(err)
	}
	return ev
}

func (w *world) setNow(t time.Time) {
	w.mu.Lock()
	w.now = t
	w.mu.Unlock()
}

// limit folds a cooldown that attempt met.
func (w *world) limit(flowID, task, attempt, scope, name string, from, until time.Time, cause string, runtimes ...string) {
	w.fold(w.evID(attempt+":"+scope, event.CooldownStarted, flowID, task, attempt, event.CooldownStartedData{
		Scope: scope, Name: name, Runtimes: runtimes, Runtime: "demo", Step: 1, From: from, Until: until,
		Source: event.CooldownRetryAfter, Class: drovertype.ClassRateLimited, Cause: cause}))
}

// schedule folds an attempt scheduled to probe the cooldowns named.
func (w *world) schedule(flowID, task string, n int, probe ...string) string {
	a := drovertype.AttemptID(flowID, task, n)
	w.fold(w.ev(event.AttemptScheduled, flowID, task, a, 0, event.AttemptScheduledData{N: n, Runtime: "demo", Pool: "default",
		Branch: drovertype.AttemptBranch(flowID, task, n), Probe: probe}))
	return a
}

// release folds the release its probe earned.
func (w *world) release(flowID, task, probe, scope, name, reason string) {
	w.fold(w.evID(probe+":"+scope, event.CooldownReleased, flowID, task, probe, event.CooldownReleasedData{Scope: scope, Name: name, Reason: reason}))
}

// wait folds a task's wait for cooldowns.
func (w *world) wait(flowID, task string, seq int, until time.Time, reason string, keys ...string) {
	w.fold(w.evID(fmt.Sprintf("%s/%s:%d", flowID, task, seq), event.TaskWaiting, flowID, task, "", event.TaskWaitingData{
		N: 1, Seq: seq, Cooldowns: keys, Until: until, Reason: reason}))
}

// limitsWorld has a cooldown of each kind, relative to t0, and a task
// waiting for the cooling one; the clock is then t0+5m.
func limitsWorld(t *testing.T) (w *world, flowID string, t0 time.Time) {
	w = newWorld(t)
	t0 = w.now
	flowID = "lim-abc123"
	w.submit(flowID, []string{"a", "b", "c", "d", "e", "f"}, nil, func(id string) string { return "do " + id })
	fail := &event.Report{Error: &event.ErrorInfo{Class: drovertype.ClassRateLimited, Message: "429"}}
	a1 := w.run(flowID, "a", 1, fail)
	w.limit(flowID, "a", a1, event.CooldownRuntime, "demo", t0, t0.Add(10*time.Minute), "429 slow down")
	b1 := w.run(flowID, "b", 1, fail)
	w.limit(flowID, "b", b1, event.CooldownModel, "m1", t0.Add(-10*time.Minute), t0.Add(time.Minute), "usage limit reached")
	w.schedule(flowID, "c", 1, "model:m1")
	w.limit(flowID, "b", b1, event.CooldownCredential, "k1", t0.Add(-10*time.Minute), t0.Add(2*time.Minute), "quota", "other", "demo")
	d1 := w.schedule(flowID, "d", 1, "credential:k1")
	w.release(flowID, "d", d1, event.CooldownCredential, "k1", "probe "+d1+" on demo succeeded")
	e1 := w.run(flowID, "e", 1, fail)
	w.fold(w.evID(e1+":x", event.CooldownStarted, flowID, "e", e1, event.CooldownStartedData{Scope: event.CooldownModel, Name: "m2",
		Runtime: "other", Step: 2, From: t0, Until: t0.Add(3 * time.Minute), Source: event.CooldownDefault, Class: drovertype.ClassRateLimited}))
	w.wait(flowID, "f", 1, t0.Add(10*time.Minute), "runtime demo cools until 12:10:00Z", "runtime:demo")
	w.setNow(t0.Add(5 * time.Minute))
	return w, flowID, t0
}

// TestCooldownTable: each cooldown's state against the console's clock,
// in order: cooling, then ended (probing or awaiting a probe), then
// released.
func TestCooldownTable(t *testing.T) {
	w, flowID, _ := limitsWorld(t)
	var rows []row
	var more int
	w.Read(func(st *projection.State) { rows, more = cooldownRows(st, w.clock()) })
	if more != 0 || len(rows) != 4 {
		t.Fatalf("%d rows, %d more", len(rows), more)
	}
	a1, c1, e1 := drovertype.AttemptID(flowID, "a", 1), drovertype.AttemptID(flowID, "c", 1), drovertype.AttemptID(flowID, "e", 1)
	want := []struct{ key, state, left, href, limit, metBy string }{
		{"runtime:demo", "cooling until 12:10:00Z", "5m left", "", "RATE_LIMITED: 429 slow down", a1},
		{"model:m2", "ended 12:03:00Z, awaiting its probe", "—", "", "RATE_LIMITED", e1},
		{"model:m1", "probing: " + c1, "—", attemptHref(c1), "RATE_LIMITED: usage limit reached", drovertype.AttemptID(flowID, "b", 1)},
		{"credential:k1", "released at ", "—", "", "RATE_LIMITED: quota", drovertype.AttemptID(flowID, "b", 1)},
	}
	for i, x := range want {
		r := rows[i]
		if r.Key != x.key || !strings.HasPrefix(r.Cells[2].Text, x.state) || r.Cells[2].Href != x.href || r.Cells[3].Text != x.left ||
			r.Cells[5].Text != x.limit || r.Cells[6].Text != x.metBy || r.Cells[6].Href != attemptHref(x.metBy) {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if c := rows[3].Cells[2].Text; !strings.Contains(c, "probe "+drovertype.AttemptID(flowID, "d", 1)+" on demo succeeded") {
		t.Errorf("released without its reason: %q", c)
	}
	if rows[3].Cells[1].Text != "k1 (demo, other)" || rows[1].Cells[4].Text != "2" || rows[0].Cells[7].Text != "1" {
		t.Errorf("name %q, step %q, limited %q", rows[3].Cells[1].Text, rows[1].Cells[4].Text, rows[0].Cells[7].Text)
	}
	// Once its end has passed, the cooling one awaits its probe: the
	// clock decides, not the fold.
	w.setNow(w.clock().Add(time.Hour))
	w.Read(func(st *projection.State) { rows, _ = cooldownRows(st, w.clock()) })
	if rows[0].Key != "runtime:demo" || !strings.HasPrefix(rows[0].Cells[2].Text, "ended 12:10:00Z") || rows[0].Cells[3].Until != 0 {
		t.Errorf("after its end: %+v", rows[0])
	}
}

// TestCooldownTableBounded: the page lists at most maxCooldowns, cooling
// first, and says how many it leaves out.
func TestCooldownTableBounded(t *testing.T) {
	st := projection.NewState()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range maxCooldowns + 50 {
		k := fmt.Sprintf("runtime:r%03d", i)
		st.Cooldowns[k] = &projection.Cooldown{Key: k, Scope: "runtime", Name: k[8:], Step: 1, Until: now.Add(-time.Duration(i) * time.Minute),
			Released: true, ReleasedAt: now}
	}
	st.Cooldowns["runtime:hot"] = &projection.Cooldown{Key: "runtime:hot", Scope: "runtime", Name: "hot", Step: 1, Until: now.Add(time.Minute)}
	rows, more := cooldownRows(st, now)
	if len(rows) != maxCooldowns || more != 51 || rows[0].Key != "runtime:hot" || rows[1].Key != "runtime:r000" ||
		rows[maxCooldowns-1].Key != fmt.Sprintf("runtime:r%03d", maxCooldowns-2) {
		t.Fatalf("%d rows, %d more, first %s %s, last %s", len(rows), more, rows[0].Key, rows[1].Key, rows[len(rows)-1].Key)
	}
	if n := cooldownsNote(len(rows), more); !strings.Contains(n.Text, "51 more") {
		t.Errorf("note %q", n.Text)
	}
}

// TestLimitsPages: the workers page's cooldowns and sandbox columns, the
// flows' budgets and spend, why a task waits.
func TestLimitsPages(t *testing.T) {
	w, flowID, _ := limitsWorld(t)
	w.workers = []*fleet.Registration{
		{ID: "w1", Host: "h1", Sandbox: "landlock ABI 7", Runtimes: []fleet.RuntimeHealth{{Name: "demo", Healthy: true, Sandbox: "landlock ABI 7"}},
			Raw: json.RawMessage(`{"id":"w1","sandbox":"landlock ABI 7","runtimes":[{"name":"demo","sandbox":"landlock ABI 7"}]}`)},
		{ID: "w2", Host: "h2", Sandbox: "off: worker.sandbox is off; CLIs run with the worker's own access",
			Runtimes: []fleet.RuntimeHealth{{Name: "demo", Healthy: true, Sandbox: "off: worker.sandbox is off"}}},
		{ID: "w3", Host: "h3"},
		{ID: "w4", Host: "h4", Sandbox: "unavailable: Landlock ABI 1 is too old", NotClaiming: "no sandbox"},
		{ID: "w5", Host: "h5", Sandbox: "landlock ABI 5: signals and abstract unix sockets not scoped (ABI 6)"},
	}
	_, srv := serve(t, w, nil)
	cl := client(t)
	_, body := get(t, cl, srv.URL+"/ui/workers")
	checkMarkup(t, "workers", body)
	for _, want := range []string{
		`<tr data-k="w1" data-i="0"><td><span>w1</span>`, `<td class="ok" title="landlock ABI 7"><span>landlock ABI 7</span></td>`,
		`<tr data-k="w2" data-i="0" class="unconfined">`, `UNCONFINED: sandbox off`, `<tr data-k="w2/demo" data-i="0" class="unconfined">`,
		`<tr data-k="w3" data-i="0" class="unconfined">`, "UNCONFINED? not reported",
		`<tr data-k="w4" data-i="0"><td>`, "unavailable: claims nothing", "landlock ABI 5 (with gaps)",
		`data-k="runtime:demo"`, "cooling until 12:10:00Z", `data-until="`, "5m left", "k1 (demo, other)", "awaiting its probe",
		`href="/ui/attempts/` + drovertype.AttemptID(flowID, "c", 1) + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("workers: no %q", want)
		}
	}
	if i := strings.Index(body, "sandbox: "); i >= 0 {
		t.Errorf("the sandbox is still in the Other column: %s", body[max(0, i-200):i+50])
	}
	// The waiting task says why, in the table and on its page.
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"?task=f")
	if !strings.Contains(body, `title="runtime demo cools until 12:10:00Z"><span>pending, waiting for runtime:demo until 12:10:00Z</span>`) {
		t.Errorf("flow page: the waiting task does not say why:\n%s", body)
	}
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"/tasks/f")
	if !strings.Contains(body, "waiting for runtime:demo until 12:10:00Z: runtime demo cools until 12:10:00Z") {
		t.Errorf("task page: no wait:\n%s", body)
	}
	// Once it starts its attempt, it waits no more.
	w.schedule(flowID, "f", 1)
	if _, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"/tasks/f"); strings.Contains(body, "waiting for") {
		t.Error("a task that started still says it waits")
	}
	// c's queued attempt waits for a worker serving its runtime: it says
	// so, with why, until one serves it.
	c1 := drovertype.AttemptID(flowID, "c", 1)
	const why = `no live worker serves demo in pool default: 2 workers: adapter: demo: binary "demo-agent" not found in PATH`
	placed := func(seq, serving int, reason string) {
		w.fold(w.evID(fmt.Sprintf("%s:%d", c1, seq), event.PlacementChanged, flowID, "c", c1, event.PlacementChangedData{
			Pool: "default", Runtime: "demo", Seq: seq, Live: 2, Serving: serving, Reason: reason}))
	}
	placed(1, 0, why)
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"?task=c")
	if !strings.Contains(body, `<span>scheduled, waiting for a worker: none serves demo in pool default</span>`) ||
		!strings.Contains(body, `binary &#34;demo-agent&#34; not found in PATH`) {
		t.Errorf("flow page: the task waiting for a worker does not say why:\n%s", body)
	}
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"/tasks/c")
	if !strings.Contains(body, "waiting for a worker: none serves demo in pool default: no live worker serves demo in pool default: 2 workers") {
		t.Errorf("task page: no wait for a worker:\n%s", body)
	}
	placed(2, 1, "")
	if _, body = get(t, cl, srv.URL+"/ui/flows/"+flowID+"/tasks/c"); strings.Contains(body, "waiting for") {
		t.Error("a task whose runtime a worker serves again still says it waits")
	}
}

// budgetWorld has a flow whose budget ended a task, one that reached its
// budget, and one without.
func budgetWorld(t *testing.T) (*world, []string) {
	w := newWorld(t)
	ids := []string{"spent-abc123", "near-abc123", "free-abc123"}
	for i, id := range ids {
		spec := flow.Spec{Name: "b", Repo: "/repos/x.git", Base: "main", Runtime: "demo",
			Tasks: []flow.Task{{ID: "a", Prompt: "x"}, {ID: "b", Prompt: "x"}, {ID: "c", Prompt: "x", Budget: &flow.Budget{Tokens: 10}}}}
		d := event.FlowSubmittedData{Spec: spec}
		switch i {
		case 0:
			d.Budget = &flow.Budget{Tokens: 2000, CostUSD: 1}
		case 1:
			d.Budget = &flow.Budget{Tokens: 1000, Running: flow.BudgetFinish}
		}
		w.fold(w.ev(event.FlowSubmitted, id, "", "", 0, d))
		w.run(id, "a", 1, &event.Report{Success: true, Usage: &event.Usage{InputTokens: new(int64(1000)), OutputTokens: new(int64(500)), CostUSD: new(0.25)}})
		w.run(id, "b", 1, &event.Report{Success: true, Usage: &event.Usage{OutputTokens: new(int64(300))}})
	}
	ended := func(id, task, reason string) {
		w.fold(w.evID(id+"/"+task+":budget:r0", event.TaskFailed, id, task, "", event.TaskFailedData{Reason: reason, Class: drovertype.ClassBudgetExceeded}))
	}
	ended(ids[0], "c", "the flow's budget reached: 1800 of 2000 tokens")
	return w, ids
}

// TestBudgetLines: spend and budget on the flows list and a flow's page;
// the budget that ended tasks says it is exhausted; reports without
// counts make the spend a floor, and say so.
func TestBudgetLines(t *testing.T) {
	w, ids := budgetWorld(t)
	_, srv := serve(t, w, nil)
	cl := client(t)
	_, list := get(t, cl, srv.URL+"/ui/")
	for _, want := range []string{
		"1.8k tok · $0.25 · 1 report without usage",
		"exhausted: 1.8k of 2.0k tok, $0.25 of $1.00; 1 task ended BUDGET_EXCEEDED",
		"reached: 1.8k of 1.0k tok (running attempts finish)",
		`<td title="no budget: spend stops nothing"><span>none</span></td>`,
	} {
		if !strings.Contains(list, want) {
			t.Errorf("flows: no %q in\n%s", want, list)
		}
	}
	_, body := get(t, cl, srv.URL+"/ui/flows/"+ids[0])
	if !strings.Contains(body, `<span data-f="budget" class="err budget-exhausted"`) || !strings.Contains(body, "1 task ended BUDGET_EXCEEDED") {
		t.Errorf("flow page: budget not exhausted:\n%s", body)
	}
	_, body = get(t, cl, srv.URL+"/ui/flows/"+ids[0]+"/tasks/a")
	if !strings.Contains(body, "none of its own: its flow&#39;s applies") || !strings.Contains(body, "1.5k tok · $0.25</span>") {
		t.Errorf("task page: budget or spend:\n%s", body)
	}
	_, body = get(t, cl, srv.URL+"/ui/flows/"+ids[0]+"/tasks/c")
	if !strings.Contains(body, "0 of 10 tok") {
		t.Errorf("task page: its own budget:\n%s", body)
	}
}

// TestBudgetEnds: a task that its own budget ended does not exhaust its
// flow's.
func TestBudgetEnds(t *testing.T) {
	f := &projection.Flow{Budget: &flow.Budget{Tokens: 1000}, Spend: &projection.Spend{Tokens: 10, Attempts: 1}}
	own := &projection.Task{State: drovertype.TaskFailed, Error: &event.ErrorInfo{Class: drovertype.ClassBudgetExceeded},
		Budget: &flow.Budget{Tokens: 5}, Spend: &projection.Spend{Tokens: 10, Attempts: 1}}
	var e budgetEnds
	e.add(f, own)
	e.add(f, &projection.Task{State: drovertype.TaskFailed, Error: &event.ErrorInfo{Class: drovertype.ClassRuntimeError}})
	c := flowBudgetCell(f, e)
	if e.flow != 0 || e.own != 1 || c.Text != "10 of 1.0k tok; 1 task ended by its own" || c.Class != "err" {
		t.Errorf("%+v: %+v", e, c)
	}
	// Both reached: the flow's is the one the controller names first.
	f.Spend.Tokens = 1000
	e = budgetEnds{}
	e.add(f, own)
	if c := flowBudgetCell(f, e); e.flow != 1 || !strings.HasPrefix(c.Text, "exhausted: ") {
		t.Errorf("%+v: %+v", e, c)
	}
	if c := spendCell(nil); c.Text != "—" {
		t.Errorf("no spend: %+v", c)
	}
}

// TestLimitsEscaped: hostile text in a cooldown's name and cause, a
// wait's reason and a sandbox string is shown as text, on the pages and
// in live updates.
func TestLimitsEscaped(t *testing.T) {
	w, flowID := hostileWorld(t)
	_, srv := serve(t, w, nil)
	cl := client(t)
	for _, p := range []string{"/ui/workers", "/ui/flows/" + flowID + "?task=c", "/ui/flows/" + flowID + "/tasks/c"} {
		_, body := get(t, cl, srv.URL+p)
		checkMarkup(t, p, body)
		if !strings.Contains(textOf(t, body), hostile[0]) {
			t.Errorf("%s: the hostile text is not shown as text", p)
		}
	}
	r := openSSE(t, cl, srv.URL+"/ui/workers/live")
	data := r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, `"t":"cooldowns"`) })
	if strings.Contains(data, "<") || !strings.Contains(data, `\u003cscript\u003e`) {
		t.Errorf("live cooldowns: %s", data)
	}
}

// TestLiveCooldowns: a workers page follows the fold for its cooldowns
// (started, released, and a cooling one's end by the clock) without
// reading the registry again for each fold.
func TestLiveCooldowns(t *testing.T) {
	w := newWorld(t)
	flowID := "live-abc123"
	w.submit(flowID, []string{"a", "b"}, nil, func(string) string { return "x" })
	w.workers = []*fleet.Registration{{ID: "w1", Sandbox: "landlock ABI 7"}}
	a1 := w.run(flowID, "a", 1, &event.Report{Error: &event.ErrorInfo{Class: drovertype.ClassRateLimited}})
	_, srv := serve(t, w, nil)
	r := openSSE(t, client(t), srv.URL+"/ui/workers/live")
	r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, `"t":"runtimes"`) })
	note := r.until("fields", 5*time.Second, func(string) bool { return true })
	if !strings.Contains(note, "No runtime, model or credential") {
		t.Fatalf("note %s", note)
	}
	reads := w.reads.Load()
	// A limit is met: its row comes, cooling, and the note goes.
	now := w.clock()
	w.limit(flowID, "a", a1, event.CooldownRuntime, "demo", now, now.Add(time.Hour), "429 slow down")
	data := r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, `"t":"cooldowns"`) })
	var m rowsMsg
	if err := json.Unmarshal([]byte(data), &m); err != nil || len(m.Rows) != 1 || m.Rows[0].Key != "runtime:demo" ||
		!strings.HasPrefix(m.Rows[0].Cells[2].Text, "cooling until") || strings.Join(m.Order, ",") != "runtime:demo" {
		t.Fatalf("rows %s", data)
	}
	// Another limit, later; both end, one attempt probes both and gets past
	// the first: released, below the other, which it probes still.
	w.limit(flowID, "a", a1, event.CooldownModel, "m1", now, now.Add(2*time.Hour), "quota")
	r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, `"k":"model:m1"`) })
	w.setNow(now.Add(3 * time.Hour)) // both ended: awaiting their probe
	b1 := w.schedule(flowID, "b", 1, "runtime:demo", "model:m1")
	w.release(flowID, "b", b1, event.CooldownRuntime, "demo", "probe "+b1+" succeeded")
	data = r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, "released at") })
	m = rowsMsg{}
	_ = json.Unmarshal([]byte(data), &m)
	if len(m.Rows) != 2 || !strings.Contains(data, "probing: "+b1) || strings.Join(m.Order, ",") != "model:m1,runtime:demo" {
		t.Fatalf("after the release: %s", data)
	}
	if n := w.reads.Load() - reads; n != 0 {
		t.Errorf("%d registry reads for folds", n)
	}
	// A cooling one ends by the clock alone, with no fold: the page is
	// woken at its end.
	now = w.clock().Add(time.Second) // the clock once the limit is folded
	w.limit(flowID, "a", a1, event.CooldownCredential, "k1", now, now.Add(300*time.Millisecond), "quota", "demo")
	r.until("rows", 5*time.Second, func(d string) bool {
		return strings.Contains(d, `"k":"credential:k1"`) && strings.Contains(d, "cooling")
	})
	w.setNow(now.Add(time.Second))
	r.until("rows", 5*time.Second, func(d string) bool {
		return strings.Contains(d, `"k":"credential:k1"`) && strings.Contains(d, "awaiting its probe")
	})
}
