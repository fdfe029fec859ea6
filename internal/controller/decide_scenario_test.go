package controller

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
)

// TestDecide runs the decision scenarios in testdata/decide. Each file is a
// story: events folded into a projection, a clock, the controller's
// configuration, and the decisions the controller makes over them. The
// projection is in memory (the fold is tested with its store in
// internal/eventlog/projection); nothing is published.
//
// Directives (one entry each in directives):
//
//	config
//	  <YAML as in a config file>
//	    The configuration from now on, loaded as the daemons load it
//	    (built-in runtimes, defaults, validation): a controller restart.
//	    Before any config, the file is empty (runtimes demo, codex,
//	    claude-code, ...; defaults.pool default; no limits).
//	clock +D | clock D
//	    Move the clock on by D, or set it to BaseTime + D. The clock starts
//	    at BaseTime; it stamps the decisions and every event folded
//	    without time=. Times print as offsets from BaseTime.
//	submit flow=ID [id=] [time=] [unresolved]
//	  <flow spec as YAML or JSON>
//	    A flow validated and resolved as the submit API does (Accept:
//	    plans, max_parallel, the project's repo) and folded; unresolved
//	    folds the spec as written, without plans.
//	event type=T flow=ID [task=] [attempt=] [epoch=] [key=] [id=] [v=] [time=]
//	  <JSON payload; empty for none>
//	raw [quoted | size=N]
//	  <the message bytes>
//	    As in testdata/fold (foldtest.BuildMessage): one message folded.
//	claim attempt=ID [worker=w1] [epoch=N]
//	    A worker's attempt_claimed, at the attempt's next epoch unless
//	    epoch= says otherwise. The attempt's job must have been queued (by
//	    a decide fold).
//	report attempt=ID ok [commit=C] [usage...]
//	report attempt=ID fail=CLASS [message=(M)] [retry_after=D] [reset_at=D] [stderr=(S)] [usage...]
//	    The claim holder's attempt_reported: success with the attempt's
//	    branch at commit C (default: the task and the attempt number), or
//	    a failure of that class; the CLI's wait, and its quota's reset at
//	    BaseTime + D. usage is any of tokens=IN/OUT (input and output
//	    tokens), cost=USD (the CLI's cost), model=M (the model it
//	    reports) and credential=FP (the fingerprint of its keys). Anything
//	    else a report holds: event type=attempt_reported. (A value with
//	    spaces goes in parentheses.)
//	integrated flow=ID [commit=C | fail=CLASS [message=(M)]]
//	    The worker's flow_integrated for the flow's scheduled build.
//	decide [fold] [as=NAME]
//	    Run the decision function and print its actions. With fold, carry
//	    them out as far as a controller without NATS can: fold each event
//	    (its effects indented below it), count each job as published, and
//	    stop each attempt (one whose claim is not folded is revoked and
//	    abandoned, as Controller.stop records it; one a worker holds is
//	    signalled, and its worker's report is the scenario's to fold), and
//	    withdraw or unplace each (one whose claim is not folded is revoked
//	    and withdrawn or unplaced, as Controller.withdraw records it; one a
//	    worker holds runs on).
//	    as=NAME keeps the decided events for fold decisions=NAME.
//	fold decisions=NAME
//	    Fold again the events of an earlier decide (a late or republished
//	    decision).
//	fleet [unread]
//	  <one worker a line: ID POOL [!(WHY IT CLAIMS NOTHING)] RUNTIME=ok|RUNTIME=(ERROR) ...>
//	    The live workers as the registry says from now on (each renewing:
//	    live at every decide), replacing those before; none is a fleet of
//	    no worker. unread: the controller has not read the registry (as
//	    before any fleet directive): it decides nothing about placement.
//	restart
//	    A new controller process over the same projection: it has queued
//	    no job yet; the fleet is the same.
//	state
//	    The projection, one line per flow, task and attempt.
//
// A folded message prints what it changed, as lines of the state marked
// + (new) or ~ (changed); "ignored" when the fold only recorded its id,
// "duplicate id" when it had seen the id, and the reason of a poison.
//
// Every decide also checks what must hold of any decision round: deciding
// again over the same state and clock, and deciding in a restarted
// controller, give the same events byte for byte; no decided event has an
// id the fold has already seen (it would be dropped as a duplicate and
// decided forever); every decided event folds without poison.
//
// `go test ./internal/controller/ -run TestDecide -rewrite` writes what
// the files now print as their expected output: read the diff. A new
// directive is a method, an entry in directives and its lines above.
func TestDecide(t *testing.T) {
	// The scenarios are the config file they say; DROVER_* variables
	// would change them (an empty variable counts as unset).
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "DROVER_") {
			t.Setenv(name, "")
		}
	}
	datadriven.Walk(t, "testdata/decide", func(t *testing.T, path string) {
		h := newDecideHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			run, ok := directives[d.Cmd]
			if !ok {
				t.Fatalf("%s: unknown directive %q", d.Pos, d.Cmd)
			}
			return run(h, t, d)
		})
	})
}

// directives are the scenario files' commands, documented on TestDecide.
var directives = map[string]func(h *decideHarness, t *testing.T, d *datadriven.TestData) string{
	"config":     (*decideHarness).config,
	"clock":      (*decideHarness).clock,
	"submit":     (*decideHarness).message,
	"event":      (*decideHarness).message,
	"raw":        (*decideHarness).message,
	"claim":      (*decideHarness).claim,
	"report":     (*decideHarness).report,
	"integrated": (*decideHarness).integrated,
	"decide":     (*decideHarness).decide,
	"fold":       (*decideHarness).foldSaved,
	"fleet":      (*decideHarness).fleet,
	"restart":    func(h *decideHarness, t *testing.T, _ *datadriven.TestData) string { h.restart(); return "" },
	"state":      func(h *decideHarness, _ *testing.T, _ *datadriven.TestData) string { return renderView(view(h.st)) },
}

// decideHarness is a projection folded in memory and a controller deciding
// over it.
type decideHarness struct {
	dir   string
	cfg   *config.Config
	c     *Controller
	st    *projection.State
	seq   uint64 // the last sequence folded
	now   time.Time
	saved map[string][]*event.Event // decide as=NAME
	// queued is every job a decide fold queued, in any process: a worker
	// claims only what was queued.
	queued map[string]bool
	// workers is the registry, as the fleet directive set it; it outlives
	// a controller's restart.
	workers *fleet.View
}

func newDecideHarness(t *testing.T) *decideHarness {
	h := &decideHarness{dir: t.TempDir(), st: projection.NewState(), now: foldtest.BaseTime, saved: map[string][]*event.Event{}, queued: map[string]bool{},
		workers: fleet.NewView()}
	h.cfg = h.loadConfig(t, "")
	h.restart()
	return h
}

// newController is a controller process without NATS: its decision
// function, over the harness's clock.
func (h *decideHarness) newController() *Controller {
	c := New(h.cfg, nil, nil, slog.New(slog.DiscardHandler))
	c.now = func() time.Time { return h.now }
	c.fleet = h.workers
	return c
}

// fleet sets the registry's live workers (see TestDecide).
func (h *decideHarness) fleet(t *testing.T, d *datadriven.TestData) string {
	h.workers.Reset()
	if d.HasArg("unread") {
		return ""
	}
	for line := range strings.SplitSeq(strings.TrimSpace(d.Input), "\n") {
		words := splitWords(line)
		if len(words) == 0 {
			continue
		}
		if len(words) < 2 {
			t.Fatalf("%s: %q: want ID POOL [!(WHY)] RUNTIME=ok|RUNTIME=(ERROR)...", d.Pos, line)
		}
		r := &fleet.Registration{ID: words[0], Pool: words[1]}
		for _, w := range words[2:] {
			if why, ok := strings.CutPrefix(w, "!"); ok {
				r.NotClaiming = strings.Trim(why, "()")
				continue
			}
			name, state, ok := strings.Cut(w, "=")
			if !ok {
				t.Fatalf("%s: %q: want RUNTIME=ok or RUNTIME=(ERROR)", d.Pos, w)
			}
			rh := fleet.RuntimeHealth{Name: name, Healthy: state == "ok"}
			if !rh.Healthy {
				rh.Error = strings.Trim(state, "()")
			}
			r.Runtimes = append(r.Runtimes, rh)
		}
		h.workers.Put(r, h.now)
	}
	h.workers.SetReady(true)
	return ""
}

// splitWords splits a line at blanks outside parentheses.
func splitWords(line string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	for _, r := range line {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case (r == ' ' || r == '\t') && depth == 0:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func (h *decideHarness) restart() { h.c = h.newController() }

func (h *decideHarness) loadConfig(t *testing.T, yaml string) *config.Config {
	file := filepath.Join(h.dir, "drover.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func (h *decideHarness) config(t *testing.T, d *datadriven.TestData) string {
	h.cfg = h.loadConfig(t, d.Input)
	h.restart()
	return ""
}

func (h *decideHarness) clock(t *testing.T, d *datadriven.TestData) string {
	if len(d.CmdArgs) != 1 {
		t.Fatalf("%s: clock takes +D or D", d.Pos)
	}
	arg := d.CmdArgs[0].Key
	rel, after := strings.CutPrefix(arg, "+")
	dur, err := time.ParseDuration(rel)
	if err != nil || dur < 0 {
		t.Fatalf("%s: clock %s: not a duration", d.Pos, arg)
	}
	if after {
		h.now = h.now.Add(dur)
	} else {
		h.now = foldtest.BaseTime.Add(dur)
	}
	return "now=" + at(h.now)
}

// message folds a submit, event or raw directive, built as the fold tests
// build them and stamped with the clock unless time= says otherwise.
func (h *decideHarness) message(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("seq") || d.HasArg("nocommit") {
		t.Fatalf("%s: seq= and nocommit are the fold tests'; here messages fold in order", d.Pos)
	}
	m := foldtest.BuildMessage(t, d, h.seq+1)
	if d.Cmd == "raw" {
		return h.foldRaw(t, m.Raw)
	}
	ev, err := event.Decode(m.Raw)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	if !d.HasArg("time") {
		ev.Time = h.now
	}
	if d.Cmd == "submit" && !d.HasArg("unresolved") {
		ev = h.accept(t, d, ev)
	}
	return h.fold(t, ev)
}

// accept resolves a submitted spec as the submit API does.
func (h *decideHarness) accept(t *testing.T, d *datadriven.TestData, ev *event.Event) *event.Event {
	var sub event.FlowSubmittedData
	if err := ev.Payload(&sub); err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	err := sub.Spec.Validate(flow.Options{
		KnownRuntime:   func(n string) bool { _, ok := h.cfg.Runtimes[n]; return ok },
		KnownProject:   func(n string) bool { _, ok := h.cfg.Projects[n]; return ok },
		DefaultRuntime: h.cfg.Defaults.Runtime,
	})
	if err != nil {
		t.Fatalf("%s: the submit API refuses this flow: %v", d.Pos, err)
	}
	data, err := Accept(h.cfg, &sub.Spec)
	if err != nil {
		t.Fatalf("%s: the submit API refuses this flow: %v", d.Pos, err)
	}
	accepted, err := event.New(ev.ID, ev.Type, ev.Time, ev.Flow, "", "", 0, data)
	if err != nil {
		t.Fatal(err)
	}
	return accepted
}

// attempt returns the attempt a directive names, which must be folded.
func (h *decideHarness) attempt(t *testing.T, d *datadriven.TestData) *projection.Attempt {
	var id string
	d.ScanArgs(t, "attempt", &id)
	a := h.st.Attempts[id]
	if a == nil {
		t.Fatalf("%s: no attempt %s folded", d.Pos, id)
	}
	return a
}

func (h *decideHarness) claim(t *testing.T, d *datadriven.TestData) string {
	a := h.attempt(t, d)
	if !h.queued[a.ID] {
		t.Fatalf("%s: claim of %s, whose job no decide fold has queued", d.Pos, a.ID)
	}
	worker, epoch := "w1", a.Epoch+1
	d.MaybeScanArgs(t, "worker", &worker)
	d.MaybeScanArgs(t, "epoch", &epoch)
	return h.fold(t, h.newEvent(t, drovertype.ClaimEventID(event.AttemptClaimed, a.ID, epoch), event.AttemptClaimed,
		a.Flow, a.Task, a.ID, epoch, event.AttemptClaimedData{Worker: worker}))
}

func (h *decideHarness) report(t *testing.T, d *datadriven.TestData) string {
	a := h.attempt(t, d)
	rep := event.Report{Branch: a.Branch, DurationMS: 1000}
	h.usage(t, d, &rep)
	switch {
	case d.HasArg("ok"):
		rep.Success, rep.Commit = true, fmt.Sprintf("%s%d", a.Task, a.N)
		d.MaybeScanArgs(t, "commit", &rep.Commit)
	case d.HasArg("fail"):
		var class, retryAfter, resetAt string
		d.ScanArgs(t, "fail", &class)
		info := &event.ErrorInfo{Class: h.class(t, d, class), Message: strings.ToLower(strings.ReplaceAll(class, "_", " "))}
		d.MaybeScanArgs(t, "message", &info.Message)
		d.MaybeScanArgs(t, "stderr", &rep.StderrTail)
		if d.MaybeScanArgs(t, "retry_after", &retryAfter); retryAfter != "" {
			info.RetryAfterMS = h.duration(t, d, retryAfter).Milliseconds()
		}
		if d.MaybeScanArgs(t, "reset_at", &resetAt); resetAt != "" {
			info.ResetAt = foldtest.BaseTime.Add(h.duration(t, d, resetAt))
		}
		rep.ExitCode, rep.Error = 1, info
	default:
		t.Fatalf("%s: report takes ok or fail=CLASS", d.Pos)
	}
	return h.fold(t, h.newEvent(t, drovertype.ClaimEventID(event.AttemptReported, a.ID, a.Epoch), event.AttemptReported,
		a.Flow, a.Task, a.ID, a.Epoch, rep))
}

// usage fills what a report directive says the CLI reported of its usage
// and credentials.
func (h *decideHarness) usage(t *testing.T, d *datadriven.TestData, rep *event.Report) {
	var tokens, model string
	var cost float64
	d.MaybeScanArgs(t, "credential", &rep.Credential)
	d.MaybeScanArgs(t, "tokens", &tokens)
	d.MaybeScanArgs(t, "model", &model)
	d.MaybeScanArgs(t, "cost", &cost)
	if tokens == "" && model == "" && cost == 0 {
		return
	}
	u := &event.Usage{Model: model}
	if cost != 0 {
		u.CostUSD = &cost
	}
	if tokens != "" {
		var in, out int64
		if _, err := fmt.Sscanf(tokens, "%d/%d", &in, &out); err != nil {
			t.Fatalf("%s: tokens=%s: want IN/OUT", d.Pos, tokens)
		}
		u.InputTokens, u.OutputTokens = &in, &out
	}
	rep.Usage = u
}

func (h *decideHarness) integrated(t *testing.T, d *datadriven.TestData) string {
	var flowID string
	d.ScanArgs(t, "flow", &flowID)
	f := h.st.Flows[flowID]
	if f == nil || f.Integration == nil {
		t.Fatalf("%s: flow %s has no integration scheduled", d.Pos, flowID)
	}
	in := f.Integration
	res := event.FlowIntegratedData{N: in.N, Branch: in.Branch, Commit: "i" + fmt.Sprint(in.N)}
	d.MaybeScanArgs(t, "commit", &res.Commit)
	if d.HasArg("fail") {
		var class string
		d.ScanArgs(t, "fail", &class)
		res.Commit = ""
		res.Error = &event.ErrorInfo{Class: h.class(t, d, class), Message: strings.ToLower(strings.ReplaceAll(class, "_", " "))}
		d.MaybeScanArgs(t, "message", &res.Error.Message)
	}
	job := drovertype.IntegrationID(f.ID, in.N)
	return h.fold(t, h.newEvent(t, drovertype.ClaimEventID(event.FlowIntegrated, job, 1), event.FlowIntegrated,
		f.ID, "", job, 1, res))
}

// class is the error class a directive names, which must be one of
// drovertype's: a scenario cannot fail with a class no writer reports.
func (h *decideHarness) class(t *testing.T, d *datadriven.TestData, s string) drovertype.ErrorClass {
	c, err := drovertype.ParseErrorClass(s)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	return c
}

func (h *decideHarness) duration(t *testing.T, d *datadriven.TestData, s string) time.Duration {
	dur, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	return dur
}

func (h *decideHarness) newEvent(t *testing.T, id string, typ event.Type, flowID, task, attempt string, epoch uint64, data any) *event.Event {
	ev, err := event.New(id, typ, h.now, flowID, task, attempt, epoch, data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// fold folds an event the way it travels: encoded, off the stream.
func (h *decideHarness) fold(t *testing.T, ev *event.Event) string {
	raw, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return h.foldRaw(t, raw)
}

func (h *decideHarness) foldRaw(t *testing.T, raw []byte) string {
	before, records := view(h.st), foldtest.MemRecords(t, h.st)
	seen := len(h.st.Seen)
	h.seq++
	h.st.ApplyRaw(h.seq, foldtest.Subject(raw), raw)
	if p := h.st.Poisons[h.seq]; p != nil {
		return "poison: " + p.Reason
	}
	if len(h.st.Seen) == seen {
		return "duplicate id: no change"
	}
	if diff := diffView(before, view(h.st)); len(diff) > 0 {
		return strings.Join(diff, "\n")
	}
	var hidden []string
	for _, line := range foldtest.DiffRecords(records, foldtest.MemRecords(t, h.st)) {
		if !strings.HasPrefix(line[2:], "e/") {
			hidden = append(hidden, line)
		}
	}
	if len(hidden) > 0 {
		return "changed what the state lines do not show: " + strings.Join(hidden, ", ")
	}
	return "ignored"
}

// decisions runs the decision function and checks what must hold of every
// round (see TestDecide).
func (h *decideHarness) decisions(t *testing.T, d *datadriven.TestData) []action {
	h.workers.Refresh(h.now) // the workers renew their registrations
	acts, err := h.c.decisions(h.st)
	if err != nil {
		t.Fatalf("%s: decisions: %v", d.Pos, err)
	}
	first := encodeDecided(t, acts)
	again, err := h.c.decisions(h.st)
	if err != nil {
		t.Fatalf("%s: decisions again: %v", d.Pos, err)
	}
	if got := encodeDecided(t, again); !slices.EqualFunc(first, got, bytes.Equal) {
		t.Errorf("%s: deciding again over the same state gave other events:\nfirst:\n%s\nagain:\n%s", d.Pos, bytes.Join(first, nl), bytes.Join(got, nl))
	}
	if a, b := otherActions(acts), otherActions(again); !slices.Equal(a, b) {
		t.Errorf("%s: deciding again gave other jobs and stops: %v, then %v", d.Pos, a, b)
	}
	fresh, err := h.newController().decisions(h.st)
	if err != nil {
		t.Fatalf("%s: decisions after a restart: %v", d.Pos, err)
	}
	if got := encodeDecided(t, fresh); !slices.EqualFunc(first, got, bytes.Equal) {
		t.Errorf("%s: a restarted controller decided other events:\nbefore:\n%s\nafter:\n%s", d.Pos, bytes.Join(first, nl), bytes.Join(got, nl))
	}
	for _, a := range acts {
		if a.event == nil {
			continue
		}
		if seq, ok := h.st.Seen[a.event.ID]; ok {
			t.Errorf("%s: decided %s, an id folded at seq %d: the fold drops it, and it is decided forever", d.Pos, a.event.ID, seq)
		}
	}
	return acts
}

var nl = []byte("\n")

// otherActions lists the jobs and stops among acts.
func otherActions(acts []action) []string {
	var out []string
	for _, a := range acts {
		switch {
		case a.job != nil:
			out = append(out, "job "+a.job.Attempt)
		case a.stop != nil:
			out = append(out, "stop "+a.stop.ID)
		case a.withdraw != nil:
			out = append(out, "withdraw "+a.withdraw.ID)
		case a.unplace != nil:
			out = append(out, "unplace "+a.unplace.ID)
		}
	}
	return out
}

func encodeDecided(t *testing.T, acts []action) [][]byte {
	var out [][]byte
	for _, a := range acts {
		if a.event != nil {
			raw, err := a.event.Encode()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, raw)
		}
	}
	return out
}

func (h *decideHarness) decide(t *testing.T, d *datadriven.TestData) string {
	acts := h.decisions(t, d)
	carry := d.HasArg("fold")
	var b strings.Builder
	var decided []*event.Event
	for _, a := range acts {
		b.WriteString(renderAction(h.st, a))
		b.WriteString("\n")
		switch {
		case a.event != nil:
			decided = append(decided, a.event)
			if carry {
				effects := h.fold(t, a.event)
				if strings.HasPrefix(effects, "poison") {
					t.Errorf("%s: the fold refuses the decision %s: %s", d.Pos, a.event.ID, effects)
				}
				writeIndented(&b, effects)
			}
		case a.job != nil && carry:
			h.c.published.add(a.job.Attempt)
			h.queued[a.job.Attempt] = true
		case a.stop != nil && carry:
			writeIndented(&b, h.stop(t, a.stop, a.reason))
		case (a.withdraw != nil || a.unplace != nil) && carry:
			writeIndented(&b, h.takeBack(t, a))
		}
	}
	if d.HasArg("as") {
		var name string
		d.ScanArgs(t, "as", &name)
		h.saved[name] = decided
	}
	if len(acts) == 0 {
		return "no decisions"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// stop carries out a stop as Controller.stop does, with the projection
// standing in for the claims bucket: an attempt whose claim is not folded
// is revoked and abandoned, one that is claimed is signalled.
func (h *decideHarness) stop(t *testing.T, a *projection.Attempt, reason string) string {
	if a.State != drovertype.AttemptScheduled {
		return "signal: " + a.Worker + " is told to stop the CLI"
	}
	ev, err := h.c.abandonment(a, reason)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("revoked: " + ev.ID + "\n")
	writeIndented(&b, h.fold(t, ev))
	return strings.TrimSuffix(b.String(), "\n")
}

// takeBack carries out a withdraw or an unplace as Controller.withdraw
// does: an attempt whose claim is not folded is revoked and withdrawn or
// unplaced; one a worker holds runs on.
func (h *decideHarness) takeBack(t *testing.T, act action) string {
	a := act.takenBack()
	if a.State != drovertype.AttemptScheduled {
		return "held by " + a.Worker + ": it runs on"
	}
	ev, err := h.c.takeBackEvent(act)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("revoked: " + ev.ID + "\n")
	writeIndented(&b, h.fold(t, ev))
	return strings.TrimSuffix(b.String(), "\n")
}

func (h *decideHarness) foldSaved(t *testing.T, d *datadriven.TestData) string {
	var name string
	d.ScanArgs(t, "decisions", &name)
	evs, ok := h.saved[name]
	if !ok {
		t.Fatalf("%s: no decide as=%s", d.Pos, name)
	}
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.ID + "\n")
		writeIndented(&b, h.fold(t, ev))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func writeIndented(b *strings.Builder, s string) {
	for line := range strings.SplitSeq(s, "\n") {
		b.WriteString("  " + line + "\n")
	}
}
