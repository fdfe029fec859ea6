package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// hostile drives a terminal every way it can: OSC 52 (writes the
// clipboard) ended by BEL, CSI clear screen, a carriage return and a
// backspace that rewrite the line, the C1 CSI as a character and as a lone
// byte, and invalid UTF-8. hostileShown is how it must reach a terminal.
const (
	hostile      = "\x1b]52;c;aGk=\x07\x1b[2J\r\b\u009b\x9b\xff"
	hostileShown = `\x1b]52;c;aGk=\a\x1b[2J\r\b\u009b\x9b\xff`
)

// fakeTerminal is a terminal as far as the commands can tell.
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// ours are the sequences watch itself draws with.
var ours = regexp.MustCompile(`\r\x1b\[[0-9]+A|\x1b\[J`)

// assertSafe fails if out holds anything that drives a terminal, or lacks
// the escaped hostile text.
func assertSafe(t *testing.T, what, out string) {
	t.Helper()
	assertShown(t, what, out, hostileShown)
}

// assertShown is assertSafe where the escaped text may be cut short (the
// watch view truncates its lines to the screen).
func assertShown(t *testing.T, what, out, shown string) {
	t.Helper()
	out = ours.ReplaceAllString(out, "")
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 reached the terminal: %q", what, out)
	}
	if i := strings.IndexAny(out, "\x1b\a\r\b\u009b"); i >= 0 {
		t.Errorf("%s: a control character reached the terminal at %d: %q", what, i, out)
	}
	if !strings.Contains(out, shown) {
		t.Errorf("%s: the hostile text is not shown escaped:\n%q", what, out)
	}
}

// assertRaw fails unless out carries the hostile bytes as they are.
func assertRaw(t *testing.T, what, out string) {
	t.Helper()
	if !strings.Contains(out, hostile) {
		t.Errorf("%s: the bytes were not kept:\n%q", what, out)
	}
}

func detail() *controller.FlowDetail {
	now := time.Now()
	return &controller.FlowDetail{
		Flow: &projection.Flow{ID: "f", State: drovertype.FlowRunning, SubmittedAt: now,
			Spec: flow.Spec{Name: "f", Repo: "/r", Base: "main", Tasks: []flow.Task{{ID: "t", Prompt: "do it"}}}},
		Tasks:    []*projection.Task{{Flow: "f", ID: "t", State: drovertype.TaskRunning, Runtime: "demo", Attempts: 1, Attempt: "f_t_1"}},
		Attempts: []*projection.Attempt{{ID: "f_t_1", Flow: "f", Task: "t", N: 1, Runtime: "demo", State: drovertype.AttemptClaimed, Worker: "w"}},
		Page:     &controller.TaskPage{Tasks: 1, Counts: map[drovertype.TaskState]int{drovertype.TaskRunning: 1}, Matching: 1},
	}
}

// TestStatusEscapes: every field of `status` and `status FLOW` that comes
// from outside reaches a terminal escaped.
func TestStatusEscapes(t *testing.T) {
	for name, set := range map[string]func(d *controller.FlowDetail){
		"flow name":          func(d *controller.FlowDetail) { d.Flow.Spec.Name = hostile },
		"repo":               func(d *controller.FlowDetail) { d.Flow.Spec.Repo = hostile },
		"base":               func(d *controller.FlowDetail) { d.Flow.Spec.Base = hostile },
		"cancel reason":      func(d *controller.FlowDetail) { d.Flow.Cancel = &projection.Cancel{Reason: hostile} },
		"integration branch": func(d *controller.FlowDetail) { d.Flow.Integration = &projection.Integration{Branch: hostile} },
		"integration error": func(d *controller.FlowDetail) {
			d.Flow.Integration = &projection.Integration{Error: &event.ErrorInfo{Message: hostile}}
		},
		"task id":                 func(d *controller.FlowDetail) { d.Tasks[0].ID = hostile },
		"task runtime":            func(d *controller.FlowDetail) { d.Tasks[0].Runtime = hostile },
		"task error":              func(d *controller.FlowDetail) { d.Tasks[0].Error = &event.ErrorInfo{Class: "X", Message: hostile} },
		"blocked by":              func(d *controller.FlowDetail) { d.Tasks[0].BlockedBy = hostile },
		"result branch":           func(d *controller.FlowDetail) { d.Tasks[0].ResultBranch = hostile },
		"retry runtime":           func(d *controller.FlowDetail) { d.Tasks[0].Retry = &projection.PendingRetry{Runtime: hostile} },
		"attempt worker":          func(d *controller.FlowDetail) { d.Attempts[0].Worker = hostile },
		"attempt id":              func(d *controller.FlowDetail) { d.Attempts[0].ID = hostile },
		"attempt state":           func(d *controller.FlowDetail) { d.Attempts[0].State = hostile },
		"flow state (a forger's)": func(d *controller.FlowDetail) { d.Flow.State = hostile },
		"why it waits":            func(d *controller.FlowDetail) { d.Waiting = map[string]*controller.WaitStatus{"t": {Reason: hostile}} },
	} {
		d := detail()
		set(d)
		var term fakeTerminal
		printStatus(&term, &controller.StatusResponse{Detail: d})
		assertSafe(t, "status FLOW: "+name, term.String())
	}
	var term fakeTerminal
	printStatus(&term, &controller.StatusResponse{Flows: []controller.FlowSummary{
		{ID: hostile, State: hostile, Tasks: map[drovertype.TaskState]int{hostile: 1}}},
		Unserved: []controller.PlacementStatus{{Runtime: hostile, Pool: hostile, Reason: hostile}}})
	assertSafe(t, "status", term.String())
	assertShown(t, "status's unserved runtimes", term.String(), hostileShown[:20])
}

// TestStatusTaskEscapes: `status --task` shows the prompts the attempts got
// (escaped on a terminal, as they are to a pipe) and every field escaped.
func TestStatusTaskEscapes(t *testing.T) {
	for name, set := range map[string]func(d *controller.FlowDetail){
		"attempt prompt": func(d *controller.FlowDetail) { d.Attempts[0].Prompt = "fix it\n" + hostile + "\nthanks" },
		"task prompt":    func(d *controller.FlowDetail) { d.Flow.Spec.Tasks[0].Prompt = hostile },
		"task error":     func(d *controller.FlowDetail) { d.Tasks[0].Error = &event.ErrorInfo{Class: hostile, Message: hostile} },
		"attempt error":  func(d *controller.FlowDetail) { d.Attempts[0].Error = &event.ErrorInfo{Message: hostile} },
		"retry reason":   func(d *controller.FlowDetail) { d.Tasks[0].Retry = &projection.PendingRetry{Reason: hostile} },
		"verify command": func(d *controller.FlowDetail) {
			d.Attempts[0].Verification = &event.Verification{Commands: []event.CommandResult{{Command: hostile}}}
		},
		"review reasons": func(d *controller.FlowDetail) {
			d.Attempts[0].Verification = &event.Verification{Review: &event.ReviewResult{Reasons: []string{hostile}}}
		},
		"scope violations": func(d *controller.FlowDetail) {
			d.Attempts[0].Verification = &event.Verification{ScopeViolations: []string{hostile}}
		},
		"worker": func(d *controller.FlowDetail) { d.Attempts[0].Worker = hostile },
		"result": func(d *controller.FlowDetail) { d.Tasks[0].ResultBranch, d.Tasks[0].ResultCommit = hostile, hostile },
		"why it waits": func(d *controller.FlowDetail) {
			d.Waiting = map[string]*controller.WaitStatus{"t": {Reason: hostile}}
		},
	} {
		d := detail()
		set(d)
		var term fakeTerminal
		if err := printTask(&term, d, "t"); err != nil {
			t.Fatal(err)
		}
		assertSafe(t, "status --task: "+name, term.String())
	}
	// To a pipe the prompt keeps its bytes; the fields stay escaped.
	d := detail()
	d.Attempts[0].Prompt = hostile
	d.Attempts[0].Worker = hostile
	var pipe bytes.Buffer
	if err := printTask(&pipe, d, "t"); err != nil {
		t.Fatal(err)
	}
	assertRaw(t, "status --task to a pipe", pipe.String())
	if !strings.Contains(pipe.String(), "worker "+hostileShown) {
		t.Errorf("the worker field is not escaped in a pipe:\n%q", pipe.String())
	}
}

func TestReportEscapes(t *testing.T) {
	for name, set := range map[string]func(r *event.Report){
		"error":        func(r *event.Report) { r.Error = &event.ErrorInfo{Class: "X", Message: hostile} },
		"signal":       func(r *event.Report) { r.Signal = hostile },
		"branch":       func(r *event.Report) { r.Branch, r.Commit = hostile, "c" },
		"diff summary": func(r *event.Report) { r.DiffSummary = " " + hostile + " | 1 +\n" },
		"stdout tail":  func(r *event.Report) { r.StdoutTail = hostile },
		"stderr tail":  func(r *event.Report) { r.StderrTail = "line\n" + hostile + "\n" },
		// A native runtime's: a refused path and a tool the model named.
		"refusal": func(r *event.Report) {
			r.Turns, r.Refusals = 1, []string{"write_file " + hostile + ": outside the worktree"}
		},
		"tool call": func(r *event.Report) { r.Turns, r.ToolCalls = 1, map[string]int{hostile: 1} },
	} {
		r := &event.Report{}
		set(r)
		var term fakeTerminal
		writeReport(&term, &controller.ReportResponse{Attempt: "f_t_1", Report: r})
		assertSafe(t, "report: "+name, term.String())
	}
	var pipe bytes.Buffer
	writeReport(&pipe, &controller.ReportResponse{Attempt: hostile, Report: &event.Report{StdoutTail: hostile}})
	assertRaw(t, "report's tail to a pipe", pipe.String())
	if !strings.Contains(pipe.String(), "attempt "+hostileShown) {
		t.Errorf("the attempt field is not escaped in a pipe:\n%q", pipe.String())
	}
}

// TestDiffEscapes: a patch is the agent's bytes: escaped on a terminal, as
// they are to a pipe, where git apply reads them.
func TestDiffEscapes(t *testing.T) {
	patch := "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+" + hostile + "\n"
	var term fakeTerminal
	if err := writeDiff(&term, diffResult{Patch: patch}); err != nil {
		t.Fatal(err)
	}
	assertSafe(t, "diff", term.String())
	if !strings.Contains(term.String(), "\n-old\n") {
		t.Errorf("diff on a terminal lost its lines: %q", term.String())
	}
	term.Reset()
	_ = writeDiff(&term, diffResult{Stat: hostile})
	assertSafe(t, "diff stat", term.String())
	var pipe bytes.Buffer
	_ = writeDiff(&pipe, diffResult{Patch: patch})
	if pipe.String() != patch {
		t.Errorf("diff to a pipe changed the patch:\n%q", pipe.String())
	}
}

func TestHealthEscapes(t *testing.T) {
	for name, rt := range map[string]fleet.RuntimeHealth{
		"name": {Name: hostile}, "version": {Name: "x", Version: hostile}, "error": {Name: "x", Error: hostile},
	} {
		var term fakeTerminal
		printHealth(&term, []*fleet.Registration{{ID: "w", Runtimes: []fleet.RuntimeHealth{rt}}})
		assertSafe(t, "runtime health: "+name, term.String())
	}
	var term fakeTerminal
	printHealth(&term, []*fleet.Registration{{ID: hostile, Runtimes: []fleet.RuntimeHealth{{Name: "x"}}}})
	assertSafe(t, "runtime health: worker", term.String())
}

// TestWatchEscapes: the plain lines and the redrawn view of watch.
func TestWatchEscapes(t *testing.T) {
	for name, set := range map[string]func(d *controller.FlowDetail){
		"worker": func(d *controller.FlowDetail) { d.Attempts[0].Worker = hostile },
		"phase":  func(d *controller.FlowDetail) { d.Attempts[0].Phase = hostile },
		"error": func(d *controller.FlowDetail) {
			d.Tasks[0].State, d.Tasks[0].Error = drovertype.TaskFailed, &event.ErrorInfo{Message: hostile}
		},
		"blocked by": func(d *controller.FlowDetail) {
			d.Tasks[0].State, d.Tasks[0].BlockedBy = drovertype.TaskBlocked, hostile
		},
		"task id": func(d *controller.FlowDetail) { d.Tasks[0].ID = hostile },
		"why it waits": func(d *controller.FlowDetail) {
			d.Waiting = map[string]*controller.WaitStatus{d.Tasks[0].ID: {Reason: hostile}}
		},
		"flow id": func(d *controller.FlowDetail) { d.Flow.ID = hostile },
	} {
		d := detail()
		set(d)
		attempts := map[string]*projection.Attempt{"f_t_1": d.Attempts[0]}
		var term fakeTerminal
		v := &ttyView{w: &term, fd: -1}
		v.draw(d, 80, 24)
		v.draw(d, 80, 24) // unchanged: nothing drawn
		d.Flow.State = drovertype.FlowFailed
		v.draw(d, 80, 24) // moves back up over the frame: ours
		assertShown(t, "watch view: "+name, term.String(), hostileShown[:20])
		if name == "flow id" {
			continue // not in the task line
		}
		var plain fakeTerminal
		(&watcher{w: &plain, lines: map[string]string{}, states: map[string]drovertype.TaskState{}}).show(d, nil)
		assertSafe(t, "watch plain line: "+name, plain.String())
		assertSafe(t, "watch line: "+name, taskLine(d.Tasks[0], attempts[d.Tasks[0].Attempt], waitOf(d, d.Tasks[0]))+" "+termsafeLineOf(d.Tasks[0].ID))
	}
}

func termsafeLineOf(s string) string {
	var b fakeTerminal
	printStatus(&b, &controller.StatusResponse{Flows: []controller.FlowSummary{{ID: s}}})
	return b.String()
}

func TestDeadLettersEscape(t *testing.T) {
	var term fakeTerminal
	if err := printDeadLetters(&term, []deadLetter{{Source: hostile, Reason: hostile, Preview: preview([]byte(hostile), 80)}}, "text"); err != nil {
		t.Fatal(err)
	}
	assertSafe(t, "dead-letters", term.String())
}

func TestResolutionEscapes(t *testing.T) {
	var term fakeTerminal
	printResolution(&term, &controller.Resolution{Repo: hostile, Tasks: map[string]policy.Resolved{
		hostile: {Worker: policy.Choice{Name: "demo", Model: hostile, Args: []string{hostile}}},
	}})
	assertSafe(t, "runtime resolve", term.String())
}

// TestErrorsEscaped: an error quoting input reaches stderr escaped.
func TestErrorsEscaped(t *testing.T) {
	for _, args := range [][]string{{"logs", hostile}, {"events", hostile}, {"cancel", hostile}, {"watch", hostile}} {
		var stderr fakeTerminal
		code := run(t.Context(), args, strings.NewReader(""), io.Discard, &stderr)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args[0], code)
		}
		out := stderr.String()
		if strings.ContainsAny(out, "\x1b\a\r\b\u009b") || !utf8.ValidString(out) {
			t.Errorf("%s: raw control characters on stderr: %q", args[0], out)
		}
	}
}
