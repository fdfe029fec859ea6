package foldtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// RenderState prints a state for people: flows with their tasks in
// dependency order, then attempts, poison and the number of ids seen.
// Times are shown as seconds after BaseTime.
func RenderState(st *projection.State) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(st.Flows)) {
		f := st.Flows[id]
		renderFlow(&b, f)
		for _, t := range st.FlowTasks(f) {
			renderTask(&b, t)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Attempts)) {
		renderAttempt(&b, st.Attempts[id])
	}
	for _, k := range slices.Sorted(maps.Keys(st.Cooldowns)) {
		renderCooldown(&b, st.Cooldowns[k])
	}
	for _, k := range slices.Sorted(maps.Keys(st.Placements)) {
		p := st.Placements[k]
		fmt.Fprintf(&b, "placement %s: seq=%d live=%d serving=%d since=%s ended_ms=%d changed=%s attempt=%s reason=%q\n",
			p.Key, p.Seq, p.Live, p.Serving, ts(p.Since), p.EndedMS, ts(p.ChangedAt), p.Attempt, p.Reason)
	}
	if l := st.Leadership; l != nil {
		fmt.Fprintf(&b, "leadership: epoch=%d controller=%s seq=%d at=%s fenced=%d\n", l.Epoch, l.Controller, l.Seq, ts(l.At), l.Fenced)
	}
	for _, seq := range slices.Sorted(maps.Keys(st.Poisons)) {
		p := st.Poisons[seq]
		fmt.Fprintf(&b, "poison %d (%d bytes): %s\n", p.Seq, p.Size, p.Reason)
	}
	fmt.Fprintf(&b, "seen: %d ids\n", len(st.Seen))
	return b.String()
}

// ts shows a time as its offset from BaseTime, "-" when unset.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(BaseTime)
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

func renderFlow(b *strings.Builder, f *projection.Flow) {
	fmt.Fprintf(b, "flow %s: %s submitted=%s", f.ID, f.State, ts(f.SubmittedAt))
	if !f.CompletedAt.IsZero() {
		fmt.Fprintf(b, " completed=%s", ts(f.CompletedAt))
	}
	if f.MaxParallel > 0 {
		fmt.Fprintf(b, " max_parallel=%d", f.MaxParallel)
	}
	if f.Round > 0 {
		fmt.Fprintf(b, " round=%d", f.Round)
	}
	if f.Paused {
		b.WriteString(" paused")
	}
	fmt.Fprintf(b, " order=[%s]\n", strings.Join(f.Order, " "))
	if c := f.Cancel; c != nil {
		fmt.Fprintf(b, "  cancel: at=%s reason=%q\n", ts(c.At), c.Reason)
	}
	renderBudget(b, "  ", f.Budget, f.Spend)
	if in := f.Integration; in != nil {
		fmt.Fprintf(b, "  integration #%d: %s branch=%s runtime=%s pool=%s", in.N, in.State, in.Branch, in.Runtime, in.Pool)
		for _, m := range in.Merge {
			fmt.Fprintf(b, " merge=%s:%s@%s", m.Task, m.Branch, m.Commit)
		}
		if in.Commit != "" {
			fmt.Fprintf(b, " commit=%s", in.Commit)
		}
		if in.Error != nil {
			fmt.Fprintf(b, " error=%s", renderError(in.Error))
		}
		if in.Base != "" {
			fmt.Fprintf(b, " base=%s", in.Base)
		}
		b.WriteString("\n")
	}
	renderPR(b, f)
}

func renderTask(b *strings.Builder, t *projection.Task) {
	fmt.Fprintf(b, "  task %s: %s runtime=%s attempts=%d", t.ID, t.State, t.Runtime, t.Attempts)
	if len(t.DependsOn) > 0 {
		fmt.Fprintf(b, " deps=[%s]", strings.Join(t.DependsOn, " "))
	}
	if t.Attempt != "" {
		fmt.Fprintf(b, " attempt=%s", t.Attempt)
	}
	if t.ResultBranch != "" || t.ResultCommit != "" {
		fmt.Fprintf(b, " result=%s@%s", t.ResultBranch, t.ResultCommit)
	}
	if t.BlockedBy != "" {
		fmt.Fprintf(b, " blocked_by=%s", t.BlockedBy)
	}
	if t.Error != nil {
		fmt.Fprintf(b, " error=%s", renderError(t.Error))
	}
	if t.Round > 0 || t.RetryBase > 0 {
		fmt.Fprintf(b, " round=%d retry_base=%d", t.Round, t.RetryBase)
	}
	if t.CancelRequested {
		b.WriteString(" cancel_requested")
	}
	if t.ReviewRound > 0 {
		fmt.Fprintf(b, " review_round=%d base=%s prompt=%q", t.ReviewRound, t.Base, t.Prompt)
	}
	fmt.Fprintf(b, " updated=%s\n", ts(t.UpdatedAt))
	if r := t.Retry; r != nil {
		fmt.Fprintf(b, "    retry #%d: %s runtime=%s", r.N, r.Strategy, r.Runtime)
		if r.Model != "" {
			fmt.Fprintf(b, " model=%s", r.Model)
		}
		fmt.Fprintf(b, " due=%s reason=%q\n", ts(r.DueAt), r.Reason)
	}
	renderBudget(b, "    ", t.Budget, t.Spend)
	if w := t.Wait; w != nil {
		fmt.Fprintf(b, "    wait #%d: attempt=%d cooldowns=[%s] until=%s since=%s reason=%q", t.Waits, w.N, strings.Join(w.Cooldowns, " "),
			ts(w.Until), ts(w.Since), w.Reason)
		if t.Waiting() == nil {
			b.WriteString(" (over)")
		}
		b.WriteString("\n")
	}
	if p := t.Plan; p != nil {
		fmt.Fprintf(b, "    plan: worker=%s", renderChoice(p.Worker))
		if p.Validator != nil {
			fmt.Fprintf(b, " validator=%s", renderChoice(*p.Validator))
		}
		if p.Review {
			b.WriteString(" review")
		}
		if p.Timeout > 0 {
			fmt.Fprintf(b, " timeout=%s(%s)", p.Timeout, p.TimeoutFrom)
		}
		fmt.Fprintf(b, " max_attempts=%d(%s)", p.Retry.MaxAttempts, p.RetryFrom["max_attempts"])
		if len(p.Retry.Fallback) > 0 {
			fmt.Fprintf(b, " fallback=[%s](%s)", strings.Join(p.Retry.Fallback, " "), p.RetryFrom["fallback"])
		}
		if p.Scope != nil {
			fmt.Fprintf(b, " scope=allow[%s]deny[%s](%s)", strings.Join(p.Scope.Allow, " "), strings.Join(p.Scope.Deny, " "), p.ScopeFrom)
		}
		b.WriteString("\n")
	}
}

func renderAttempt(b *strings.Builder, a *projection.Attempt) {
	fmt.Fprintf(b, "attempt %s: %s/%s #%d %s epoch=%d", a.ID, a.Flow, a.Task, a.N, a.State, a.Epoch)
	if a.Phase != "" {
		fmt.Fprintf(b, " phase=%s", a.Phase)
	}
	if a.Worker != "" {
		fmt.Fprintf(b, " worker=%s", a.Worker)
	}
	if a.Fenced > 0 {
		fmt.Fprintf(b, " fenced=%d", a.Fenced)
	}
	fmt.Fprintf(b, " scheduled=%s claimed=%s ended=%s\n", ts(a.ScheduledAt), ts(a.ClaimedAt), ts(a.EndedAt))
	fmt.Fprintf(b, "  runtime=%s pool=%s branch=%s", a.Runtime, a.Pool, a.Branch)
	if a.Timeout > 0 {
		fmt.Fprintf(b, " timeout=%s", a.Timeout)
	}
	for _, m := range a.Merge {
		fmt.Fprintf(b, " merge=%s:%s@%s", m.Task, m.Branch, m.Commit)
	}
	if a.Model != "" {
		fmt.Fprintf(b, " model=%s", a.Model)
	}
	if len(a.Args) > 0 {
		fmt.Fprintf(b, " args=[%s]", strings.Join(a.Args, " "))
	}
	b.WriteString("\n")
	if a.Prompt != "" {
		fmt.Fprintf(b, "  prompt=%q\n", a.Prompt)
	}
	if a.Worktree != "" || a.BaseCommit != "" || a.Pid != 0 || a.DiffStat != "" {
		fmt.Fprintf(b, "  worktree=%s base=%s pid=%d diff=%q\n", a.Worktree, a.BaseCommit, a.Pid, a.DiffStat)
	}
	if r := a.Report; r != nil {
		fmt.Fprintf(b, "  report: success=%t exit=%d", r.Success, r.ExitCode)
		if r.Branch != "" || r.Commit != "" {
			fmt.Fprintf(b, " result=%s@%s", r.Branch, r.Commit)
		}
		if r.Error != nil {
			fmt.Fprintf(b, " error=%s", renderError(r.Error))
		}
		b.WriteString("\n")
	}
	if a.Error != nil {
		fmt.Fprintf(b, "  classified: %s\n", renderError(a.Error))
	}
	if v := a.Verification; v != nil {
		renderVerification(b, v)
	}
	if len(a.Probe) > 0 {
		fmt.Fprintf(b, "  probe: [%s]\n", strings.Join(a.Probe, " "))
	}
	if a.Withdrawn != "" {
		fmt.Fprintf(b, "  withdrawn: %q\n", a.Withdrawn)
	}
	if a.UnservedBeforeMS > 0 {
		fmt.Fprintf(b, "  unserved before it: %dms\n", a.UnservedBeforeMS)
	}
}

func renderBudget(b *strings.Builder, indent string, budget *flow.Budget, spend *projection.Spend) {
	if budget != nil {
		fmt.Fprintf(b, "%sbudget: tokens=%d cost_usd=%g", indent, budget.Tokens, budget.CostUSD)
		if budget.Running != "" {
			fmt.Fprintf(b, " running=%s", budget.Running)
		}
		b.WriteString("\n")
	}
	if spend != nil {
		fmt.Fprintf(b, "%sspend: tokens=%d cost_usd=%g attempts=%d", indent, spend.Tokens, spend.CostUSD, spend.Attempts)
		for _, m := range slices.Sorted(maps.Keys(spend.Unpriced)) {
			u := spend.Unpriced[m]
			fmt.Fprintf(b, " unpriced[%s]=%d/%d/%d/%d", m, u.Input, u.Output, u.CacheRead, u.CacheWrite)
		}
		b.WriteString("\n")
	}
}

func renderCooldown(b *strings.Builder, c *projection.Cooldown) {
	fmt.Fprintf(b, "cooldown %s: step=%d from=%s until=%s source=%s class=%s runtime=%s attempt=%s started=%s limited=%d",
		c.Key, c.Step, ts(c.From), ts(c.Until), c.Source, c.Class, c.Runtime, c.Attempt, ts(c.StartedAt), c.Limited)
	if c.InFlight > 0 {
		fmt.Fprintf(b, " in_flight=%d", c.InFlight)
	}
	if len(c.Runtimes) > 0 {
		fmt.Fprintf(b, " runtimes=[%s]", strings.Join(c.Runtimes, " "))
	}
	if c.Probe != "" {
		fmt.Fprintf(b, " probe=%s", c.Probe)
	}
	if c.Released {
		fmt.Fprintf(b, " released=%s reason=%q", ts(c.ReleasedAt), c.ReleaseReason)
	}
	fmt.Fprintf(b, " cause=%q\n", c.Cause)
}

func renderVerification(b *strings.Builder, v *event.Verification) {
	fmt.Fprintf(b, "  verification: passed=%t", v.Passed)
	for _, c := range v.Commands {
		fmt.Fprintf(b, " cmd=%q:%d", c.Command, c.ExitCode)
		if c.TimedOut {
			b.WriteString("(timed out)")
		}
	}
	if r := v.Review; r != nil {
		fmt.Fprintf(b, " review=%s:%t", r.Runtime, r.Passed)
		if len(r.Reasons) > 0 {
			fmt.Fprintf(b, "%q", r.Reasons)
		}
		if r.Error != "" {
			fmt.Fprintf(b, "(error %q)", r.Error)
		}
	}
	if len(v.ScopeViolations) > 0 {
		fmt.Fprintf(b, " scope_violations=[%s]", strings.Join(v.ScopeViolations, " "))
	}
	b.WriteString("\n")
}
