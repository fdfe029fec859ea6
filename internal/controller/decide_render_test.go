package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/flow"
)

// How the decision scenarios (decide_scenario_test.go) print decisions and
// the projection: one line per thing, the fields that decide what happens
// next, times as offsets from foldtest.BaseTime.

// at prints a time as its offset from BaseTime.
func at(t time.Time) string {
	d := t.Sub(foldtest.BaseTime)
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// fields builds a line of " key=value" pairs, skipping empty values.
type fields struct{ strings.Builder }

func (f *fields) add(key string, value any) *fields {
	s := fmt.Sprint(value)
	switch value.(type) {
	case string:
	default:
		if s == "0" || s == "false" || s == "[]" || s == "0s" {
			return f
		}
	}
	if s != "" {
		fmt.Fprintf(f, " %s=%s", key, s)
	}
	return f
}

func (f *fields) quoted(key, value string) *fields {
	if value != "" {
		fmt.Fprintf(f, " %s=%q", key, value)
	}
	return f
}

func (f *fields) flag(name string, on bool) *fields {
	if on {
		f.WriteString(" " + name)
	}
	return f
}

func merges(m []event.DepResult) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, len(m))
	for i, r := range m {
		parts[i] = r.Task + ":" + r.Branch + "@" + r.Commit
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// decisionFields prints the payload of each type of decision. A type not
// listed prints its payload as JSON, so a new decision shows up in the
// scenarios before it has a line of its own here.
var decisionFields = map[event.Type]func(ev *event.Event) (string, error){
	event.AttemptScheduled: payload(func(d *event.AttemptScheduledData) string {
		var f fields
		f.add("n", d.N).add("runtime", d.Runtime).add("model", d.Model)
		if len(d.Args) > 0 {
			f.add("args", "["+strings.Join(d.Args, " ")+"]")
		}
		f.add("pool", d.Pool).add("branch", d.Branch).add("timeout", time.Duration(d.Timeout)).add("merge", merges(d.Merge))
		if len(d.Probe) > 0 {
			f.add("probe", "["+strings.Join(d.Probe, " ")+"]")
		}
		return f.String() + prompt(d.Prompt)
	}),
	event.CooldownStarted: payload(func(d *event.CooldownStartedData) string {
		var f fields
		f.add("key", event.CooldownKey(d.Scope, d.Name)).add("step", d.Step).add("from", at(d.From)).add("until", at(d.Until)).
			add("source", d.Source).add("on", d.Runtime).add("in_flight", d.InFlight)
		if len(d.Runtimes) > 0 {
			f.add("runtimes", "["+strings.Join(d.Runtimes, " ")+"]")
		}
		f.quoted("cause", d.Cause)
		return f.String()
	}),
	event.CooldownReleased: payload(func(d *event.CooldownReleasedData) string {
		var f fields
		f.add("key", event.CooldownKey(d.Scope, d.Name)).quoted("reason", d.Reason)
		return f.String()
	}),
	event.TaskWaiting: payload(func(d *event.TaskWaitingData) string {
		var f fields
		f.add("n", d.N).add("seq", d.Seq).add("cooldowns", "["+strings.Join(d.Cooldowns, " ")+"]")
		if !d.Until.IsZero() {
			f.add("until", at(d.Until))
		}
		f.quoted("reason", d.Reason)
		return f.String()
	}),
	event.RuntimeErrorClassified: payload(func(d *event.RuntimeErrorClassifiedData) string {
		var f fields
		f.add("class", d.Class).add("category", d.Category).quoted("message", d.Message)
		return f.String()
	}),
	event.RuntimeRecoveryScheduled: payload(func(d *event.RuntimeRecoveryScheduledData) string {
		var f fields
		f.add("strategy", d.Strategy).add("n", d.N).add("runtime", d.Runtime).add("model", d.Model).
			add("delay", (time.Duration(d.DelayMS)*time.Millisecond).String()).add("due", at(d.DueAt)).quoted("reason", d.Reason)
		return f.String()
	}),
	event.PlacementChanged: payload(func(d *event.PlacementChangedData) string {
		var f fields
		f.add("key", event.PlacementKey(d.Pool, d.Runtime)).add("seq", d.Seq).add("serving", fmt.Sprint(d.Serving)).add("live", fmt.Sprint(d.Live)).quoted("reason", d.Reason)
		return f.String()
	}),
	event.TaskFailed: payload(func(d *event.TaskFailedData) string {
		var f fields
		f.add("class", d.Class).quoted("reason", d.Reason)
		return f.String()
	}),
	event.TaskCancelled: payload(func(d *event.TaskCancelledData) string {
		var f fields
		f.quoted("reason", d.Reason)
		return f.String()
	}),
	event.IntegrationScheduled: payload(func(d *event.IntegrationScheduledData) string {
		var f fields
		f.add("n", d.N).add("branch", d.Branch).add("runtime", d.Runtime).add("pool", d.Pool).add("merge", merges(d.Merge))
		return f.String()
	}),
	event.FlowCompleted: payload(func(d *event.FlowCompletedData) string {
		var f fields
		f.add("state", d.State).add("round", d.Round)
		return f.String()
	}),
	event.PullRequestRequested: payload(func(d *event.PullRequestRequestedData) string {
		var f fields
		f.add("n", d.N).add("round", d.Round).add("forge", d.Forge).add("repo", d.Repo).add("head", d.Head).add("base", d.Base).
			quoted("title", d.Title).flag("draft", d.Draft)
		for _, l := range []struct {
			k string
			v []string
		}{{"labels", d.Labels}, {"reviewers", d.Reviewers}, {"assignees", d.Assignees}} {
			if len(l.v) > 0 {
				f.add(l.k, "["+strings.Join(l.v, " ")+"]")
			}
		}
		return f.String() + block("body", d.Body) + block("comment", d.Comment)
	}),
	event.ReviewRoundStarted: payload(func(d *event.ReviewRoundStartedData) string {
		var f fields
		f.add("n", d.N).add("base", d.Base).add("feedback", "["+strings.Join(d.Feedback, " ")+"]")
		out := f.String()
		for _, t := range d.Tasks {
			out += "\n  task " + t.ID
			if len(t.Files) > 0 {
				out += " files=[" + strings.Join(t.Files, " ") + "]"
			}
			out += strings.ReplaceAll(prompt(t.Prompt), "\n  ", "\n    ")
		}
		return out
	}),
}

// block prints a text as an indented block under its line, named.
func block(name, text string) string {
	if text == "" {
		return ""
	}
	return strings.Replace(prompt(text), "prompt:", name+":", 1)
}

func payload[T any](render func(*T) string) func(ev *event.Event) (string, error) {
	return func(ev *event.Event) (string, error) {
		var d T
		if err := ev.Payload(&d); err != nil {
			return "", err
		}
		return render(&d), nil
	}
}

// prompt prints a composed prompt as an indented block under its line.
func prompt(p string) string {
	if p == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n  prompt:")
	for line := range strings.SplitSeq(p, "\n") {
		b.WriteString(strings.TrimRight("\n  | "+line, " "))
	}
	return b.String()
}

// renderAction prints one action of the decision function.
func renderAction(st *projection.State, a action) string {
	switch {
	case a.event != nil:
		ev := a.event
		render, ok := decisionFields[ev.Type]
		if !ok {
			return fmt.Sprintf("%s %s", ev.ID, ev.Data)
		}
		s, err := render(ev)
		if err != nil {
			return fmt.Sprintf("%s undecodable: %v", ev.ID, err)
		}
		return ev.ID + s
	case a.job != nil:
		return "job " + a.job.Attempt + renderJob(st, a.job)
	case a.stop != nil:
		var f fields
		f.add("state", a.stop.State).add("worker", a.stop.Worker).add("epoch", a.stop.Epoch).quoted("reason", a.reason)
		return "stop " + a.stop.ID + f.String()
	case a.withdraw != nil:
		var f fields
		f.add("state", a.withdraw.State).add("worker", a.withdraw.Worker).quoted("reason", a.reason)
		return "withdraw " + a.withdraw.ID + f.String()
	case a.unplace != nil:
		var f fields
		f.add("unserved", time.Duration(a.unplaced.UnservedMS)*time.Millisecond).add("timeout", time.Duration(a.unplaced.TimeoutMS)*time.Millisecond).
			quoted("reason", a.reason)
		return "unplace " + a.unplace.ID + f.String()
	}
	return "empty action"
}

// renderJob prints what a job carries. Its prompt should be the attempt's
// composed one (prompt=composed), or the task's as written on a first
// attempt (not printed); any other is printed whole.
func renderJob(st *projection.State, j *jobSpec) string {
	var f fields
	if j.Kind != drovertype.JobAttempt {
		f.add("kind", j.Kind)
	}
	f.add("runtime", j.Runtime).add("model", j.Model)
	if len(j.Args) > 0 {
		f.add("args", "["+strings.Join(j.Args, " ")+"]")
	}
	f.add("pool", j.Pool).add("branch", j.Branch).add("timeout", time.Duration(j.Timeout)).add("merge", merges(j.Merge))
	if len(j.Verify) > 0 {
		verify, _ := json.Marshal(j.Verify)
		f.add("verify", string(verify))
	}
	if s := j.Scope; s != nil {
		if len(s.Allow) > 0 {
			f.add("allow", "["+strings.Join(s.Allow, " ")+"]")
		}
		if len(s.Deny) > 0 {
			f.add("deny", "["+strings.Join(s.Deny, " ")+"]")
		}
	}
	if r := j.Review; r != nil {
		f.add("review", r.Runtime)
	}
	if fl := st.Flows[j.Flow]; fl != nil && j.Base != fl.Spec.Base {
		f.add("base", j.Base)
	}
	if j.Kind == drovertype.JobIntegrate {
		return f.String()
	}
	want := ""
	if a := st.Attempts[j.Attempt]; a != nil && a.Prompt != "" {
		want = a.Prompt
		f.add("prompt", "composed")
	} else if fl := st.Flows[j.Flow]; fl != nil {
		if spec, _ := fl.Spec.Task(j.Task); spec != nil {
			want = spec.Prompt
		}
	}
	if j.Prompt != want {
		return f.String() + prompt(j.Prompt)
	}
	return f.String()
}

// A viewLine is one flow, task or attempt of the projection, printed.
// What never changes (a flow's repo) is in more, printed with the whole
// state and when the thing is new, not on every change.
type viewLine struct{ key, text, more string }

func (l viewLine) String() string { return l.key + ": " + l.text + l.more }

// view prints the projection: each flow, then its tasks in the flow's
// order, then their attempts.
func view(st *projection.State) []viewLine {
	var out []viewLine
	for _, id := range slices.Sorted(maps.Keys(st.Flows)) {
		f := st.Flows[id]
		var more fields
		more.add("repo", f.Spec.Repo).add("base", f.Spec.Base)
		out = append(out, viewLine{"flow " + f.ID, flowLine(f), more.String()})
		tasks := st.FlowTasks(f)
		for _, t := range tasks {
			out = append(out, viewLine{key: "task " + f.ID + "/" + t.ID, text: taskLine(st, t)})
		}
		for _, t := range tasks {
			for n := 1; n <= t.Attempts; n++ {
				if a := st.Attempts[drovertype.AttemptID(f.ID, t.ID, n)]; a != nil {
					out = append(out, viewLine{key: "attempt " + a.ID, text: attemptLine(a)})
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(st.Cooldowns)) {
		out = append(out, viewLine{key: "cooldown " + k, text: cooldownLine(st.Cooldowns[k])})
	}
	for _, k := range slices.Sorted(maps.Keys(st.Placements)) {
		out = append(out, viewLine{key: "placement " + k, text: placementLine(st.Placements[k])})
	}
	return out
}

func placementLine(p *projection.Placement) string {
	var b fields
	if p.Unserved() {
		b.WriteString("unserved")
		b.add("since", at(p.Since))
	} else {
		b.WriteString("served")
	}
	b.add("seq", p.Seq).add("serving", fmt.Sprint(p.Serving)).add("live", fmt.Sprint(p.Live))
	if p.EndedMS > 0 {
		b.add("ended", (time.Duration(p.EndedMS) * time.Millisecond).String())
	}
	return b.String()
}

func cooldownLine(c *projection.Cooldown) string {
	var b fields
	if c.Released {
		b.WriteString("released")
		b.add("at", at(c.ReleasedAt))
	} else {
		b.WriteString("holds")
		b.add("until", at(c.Until))
	}
	b.add("step", c.Step).add("source", c.Source).add("limited", c.Limited).add("in_flight", c.InFlight).add("probe", c.Probe)
	if len(c.Runtimes) > 0 {
		b.add("runtimes", "["+strings.Join(c.Runtimes, " ")+"]")
	}
	return b.String()
}

// budgetLine prints a budget against its spend.
func budgetLine(b *fields, budget *flow.Budget, sp *projection.Spend) {
	if budget != nil {
		if budget.Tokens > 0 {
			b.add("budget_tokens", budget.Tokens)
		}
		if budget.CostUSD > 0 {
			b.add("budget_usd", budget.CostUSD)
		}
		b.add("running", budget.Running)
	}
	if sp != nil {
		b.add("spent_tokens", sp.Tokens)
		if sp.CostUSD > 0 {
			b.add("spent_usd", fmt.Sprintf("%.4f", sp.CostUSD))
		}
		for _, m := range slices.Sorted(maps.Keys(sp.Unpriced)) {
			u := sp.Unpriced[m]
			b.add("unpriced["+m+"]", fmt.Sprintf("%d/%d", u.Input, u.Output))
		}
	}
}

func flowLine(f *projection.Flow) string {
	var b fields
	b.WriteString(string(f.State))
	b.add("max_parallel", f.MaxParallel).add("round", f.Round).flag("paused", f.Paused)
	budgetLine(&b, f.Budget, f.Spend)
	if c := f.Cancel; c != nil {
		b.WriteString(" cancel_requested")
		b.quoted("reason", c.Reason)
	}
	if in := f.Integration; in != nil {
		b.add("integration", fmt.Sprintf("#%d:%s", in.N, in.State)).add("branch", in.Branch).add("commit", in.Commit)
		if in.Error != nil {
			b.add("error", in.Error.Class)
		}
		b.add("from", in.Base)
	}
	if pr := f.PR; pr != nil {
		b.add("pr", fmt.Sprintf("#%d:%s", pr.Number, pr.State)).add("requests", pr.Requests)
		if pr.Pending != nil {
			b.add("pending", pr.Pending.N)
		}
		if pr.Error != nil {
			b.add("pr_error", pr.Error.Class)
		}
		b.add("feedback", len(pr.Feedback))
		for _, r := range pr.Rounds {
			b.add(fmt.Sprintf("round%d", r.N), r.State)
		}
	}
	return b.String()
}

func taskLine(st *projection.State, t *projection.Task) string {
	var b fields
	b.WriteString(string(t.State))
	if r := t.Retry; r != nil {
		runtime := r.Runtime
		if r.Model != "" {
			runtime += "/" + r.Model
		}
		b.add("next", fmt.Sprintf("#%d:%s:%s", r.N, r.Strategy, runtime)).add("due", at(r.DueAt))
	}
	if t.ResultBranch != "" || t.ResultCommit != "" {
		b.add("result", t.ResultBranch+"@"+t.ResultCommit)
	}
	b.add("blocked_by", t.BlockedBy)
	if t.Error != nil {
		b.add("error", t.Error.Class)
	}
	b.add("round", t.Round).flag("cancel_requested", t.CancelRequested)
	budgetLine(&b, t.Budget, t.Spend)
	if w := t.Waiting(); w != nil {
		b.add("waits", fmt.Sprintf("#%d:[%s]", w.N, strings.Join(w.Cooldowns, " ")))
		if !w.Until.IsZero() {
			b.add("until", at(w.Until))
		} else {
			b.add("until", "probe")
		}
	}
	if p := st.Unplaced(t); p != nil {
		b.add("waits_for", fmt.Sprintf("a worker serving %s since %s", p.Key, at(p.Since)))
	}
	return b.String()
}

func attemptLine(a *projection.Attempt) string {
	var b fields
	b.WriteString(string(a.State))
	runtime := a.Runtime
	if a.Model != "" {
		runtime += "/" + a.Model
	}
	b.add("runtime", runtime).add("worker", a.Worker).add("epoch", a.Epoch)
	if a.State == drovertype.AttemptClaimed && a.Phase != event.AttemptClaimed {
		b.add("phase", a.Phase)
	}
	switch {
	case a.Error != nil:
		b.add("error", a.Error.Class)
	case a.Report != nil && a.Report.Error != nil:
		b.add("reported", a.Report.Error.Class)
	}
	if v := a.Verification; v != nil {
		b.add("verification", map[bool]string{true: "passed", false: "failed"}[v.Passed])
	}
	b.add("fenced", a.Fenced)
	if len(a.Probe) > 0 {
		b.add("probe", "["+strings.Join(a.Probe, " ")+"]")
	}
	if a.UnservedBeforeMS > 0 {
		b.add("unserved_before", (time.Duration(a.UnservedBeforeMS) * time.Millisecond).String())
	}
	return b.String()
}

func renderView(lines []viewLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// diffView lists the lines that are new (+) or changed (~) after a fold,
// in the view's order, then those gone (-).
func diffView(before, after []viewLine) []string {
	old := map[string]string{}
	for _, l := range before {
		old[l.key] = l.text
	}
	var out []string
	now := map[string]bool{}
	for _, l := range after {
		now[l.key] = true
		prev, ok := old[l.key]
		switch {
		case !ok:
			out = append(out, "+ "+l.String())
		case prev != l.text:
			out = append(out, fmt.Sprintf("~ %s: %s", l.key, l.text))
		}
	}
	for _, l := range before {
		if !now[l.key] {
			out = append(out, "- "+l.key)
		}
	}
	return out
}
