package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// What the fleet's limits look like on the pages: cooldowns (the workers
// page), budgets and spend (flows), why a task waits, and how each worker
// confines its attempts. The projection holds the facts
// (internal/eventlog/projection/cooldown.go, budget.go); whether a cooldown still
// cools is decided here with the console's clock, as the fold never reads
// one.

// maxCooldowns bounds the cooldowns the workers page lists: released ones
// stay in the projection until the next limit in their scope.
const maxCooldowns = 200

// clock prints a time of day the way the pages do, UTC to the second.
func clock(t time.Time) string { return t.UTC().Format("15:04:05Z") }

// leftCell counts down to until: the page keeps it current (console.js).
func leftCell(until, now time.Time) cell {
	return cell{Text: left(until.Sub(now)), Until: until.UnixMilli(), Title: until.UTC().Format(time.RFC3339)}
}

// left words the time left as the page's script does (console.js).
func left(d time.Duration) string {
	if d <= 0 {
		return "ended"
	}
	return age(d) + " left"
}

// cooldown ranks: cooling first, then ended but not released (a probe
// decides), then released.
const (
	rankCooling = iota
	rankHalfOpen
	rankReleased
)

func cooldownRank(c *projection.Cooldown, now time.Time) int {
	switch {
	case c.Released:
		return rankReleased
	case c.Cooling(now):
		return rankCooling
	}
	return rankHalfOpen
}

// cooldownRows lists the cooldowns: cooling first, the soonest to end on
// top, then the others, the latest to end on top; at most maxCooldowns,
// with the count of the rest.
func cooldownRows(st *projection.State, now time.Time) (rows []row, more int) {
	type ranked struct {
		c    *projection.Cooldown
		rank int
	}
	all := make([]ranked, 0, len(st.Cooldowns))
	for _, c := range st.Cooldowns {
		all = append(all, ranked{c, cooldownRank(c, now)})
	}
	slices.SortFunc(all, func(a, b ranked) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		if x := a.c.Until.Compare(b.c.Until); x != 0 {
			if a.rank == rankCooling {
				return x
			}
			return -x
		}
		return strings.Compare(a.c.Key, b.c.Key)
	})
	if len(all) > maxCooldowns {
		more = len(all) - maxCooldowns
		all = all[:maxCooldowns]
	}
	for _, r := range all {
		rows = append(rows, cooldownRow(r.c, r.rank, now))
	}
	return rows, more
}

// nextCooldownEnd is when the next cooling cooldown ends, zero if none
// cools.
func nextCooldownEnd(st *projection.State, now time.Time) time.Time {
	var next time.Time
	for _, c := range st.Cooldowns {
		if c.Cooling(now) && (next.IsZero() || c.Until.Before(next)) {
			next = c.Until
		}
	}
	return next
}

// cooldownsNote says what the cooldowns table does not: that it is empty,
// or how many it leaves out.
func cooldownsNote(shown, more int) cell {
	switch {
	case more > 0:
		return cell{Text: fmt.Sprintf("%d more released cooldowns, ended longest ago, are not listed.", more)}
	case shown == 0:
		return cell{Text: "No runtime, model or credential has met a limit."}
	}
	return cell{}
}

func cooldownRow(c *projection.Cooldown, rank int, now time.Time) row {
	name := cell{Text: c.Name}
	if c.Scope == event.CooldownCredential {
		name.Title = "a credential's fingerprint, never the secret"
		if len(c.Runtimes) > 0 {
			name.Text += " (" + strings.Join(c.Runtimes, ", ") + ")"
		}
	}
	state, remaining := cooldownStateCell(c, rank, now), cell{Text: "—"}
	if rank == rankCooling {
		remaining = leftCell(c.Until, now)
	}
	limit := cell{Text: string(c.Class), Class: "err", Title: c.Cause}
	if c.Cause != "" {
		limit.Text += ": " + oneLine(c.Cause, 200)
	}
	if c.Source != "" {
		limit.Title = strings.TrimPrefix(c.Cause+" (its length from "+c.Source+")", " ")
	}
	metBy := cell{Text: "—"}
	if c.Attempt != "" {
		metBy = cell{Text: c.Attempt, Href: attemptHref(c.Attempt), Title: "met on " + c.Runtime + ", decided " +
			c.StartedAt.UTC().Format(time.RFC3339)}
	}
	limited := cell{Text: strconv.Itoa(c.Limited), Title: fmt.Sprintf("attempts that met the limit since it began; %d others were running then", c.InFlight)}
	return row{Key: c.Key, Cells: []cell{
		{Text: c.Scope}, name, state, remaining, {Text: strconv.Itoa(c.Step), Title: "limits its probes met, from 1: the backoff"},
		limit, metBy, limited,
	}}
}

func cooldownStateCell(c *projection.Cooldown, rank int, now time.Time) cell {
	switch rank {
	case rankCooling:
		return cell{Text: "cooling until " + clock(c.Until), Class: "state cd-cooling", Title: c.Until.UTC().Format(time.RFC3339)}
	case rankReleased:
		s := "released at " + clock(c.ReleasedAt)
		if c.ReleaseReason != "" {
			s += ": " + oneLine(c.ReleaseReason, 200)
		}
		return cell{Text: s, Class: "state cd-released", Title: c.ReleaseReason}
	}
	if c.Probe != "" {
		return cell{Text: "probing: " + c.Probe, Href: attemptHref(c.Probe), Class: "state cd-probing",
			Title: "ended at " + c.Until.UTC().Format(time.RFC3339) + "; this attempt goes first, and its success releases it"}
	}
	return cell{Text: "ended " + clock(c.Until) + ", awaiting its probe", Class: "state cd-probing",
		Title: "the next attempt in its scope goes first, and its success releases it"}
}

// sandboxCell shows how a worker confines its attempts, as it registers it
// (internal/worker/sandbox.go: "landlock ABI N[: gaps]", "off: why",
// "unavailable: why"). unconfined is true when its attempts may run with
// the worker's own access: sandbox off, or a worker that does not say.
func sandboxCell(s string) (c cell, unconfined bool) {
	head, detail, _ := strings.Cut(s, ": ")
	switch {
	case s == "":
		return cell{Text: "UNCONFINED? not reported", Class: "err unconfined",
			Title: "this worker registers no sandbox, so it may predate sandboxing and run CLIs with its own access"}, true
	case strings.HasPrefix(s, "landlock"):
		c = cell{Text: head, Class: "ok", Title: s}
		if detail != "" {
			c.Text += " (with gaps)"
		}
		return c, false
	case head == "off":
		return cell{Text: "UNCONFINED: sandbox off", Class: "err unconfined", Title: oneLine(detail, 500)}, true
	case head == "unavailable":
		return cell{Text: "unavailable: claims nothing", Class: "err", Title: oneLine(detail, 500)}, false
	}
	return cell{Text: oneLine(s, 200), Title: "a sandbox this console does not know"}, false
}

// spendCell is what a flow's or a task's attempts reported using
// (projection.Spend): tokens, the cost the CLIs reported, and how many
// reports left a count out, which makes the sum a floor.
func spendCell(sp *projection.Spend) cell {
	if sp == nil || sp.Attempts == 0 {
		return cell{Text: "—", Title: "no report carried usage yet"}
	}
	text := tokens(sp.Tokens) + " tok"
	if sp.CostUSD > 0 {
		text += fmt.Sprintf(" · $%.2f", sp.CostUSD)
	}
	title := fmt.Sprintf("%d input and output tokens over %d reports; $%.4f as the CLIs reported it", sp.Tokens, sp.Attempts, sp.CostUSD)
	var unpriced int64
	for _, t := range sp.Unpriced {
		unpriced += t.Input + t.Output + t.CacheRead + t.CacheWrite
	}
	if unpriced > 0 {
		title += fmt.Sprintf("; %d tokens reported without a cost, which the controller prices from its pricing table (controller status)", unpriced)
	}
	if sp.Unreported > 0 {
		text += fmt.Sprintf(" · %d %s without usage", sp.Unreported, plural(sp.Unreported, "report", "reports"))
		title += fmt.Sprintf("; %d reports left token counts out: the sum is a floor", sp.Unreported)
	}
	return cell{Text: text, Class: "spend", Title: title}
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// budgetCell is a budget against its spend. ended counts the tasks it
// ended (BUDGET_EXCEEDED): then it is exhausted.
func budgetCell(b *flow.Budget, sp *projection.Spend, ended int) cell {
	if !b.Limited() {
		return cell{Text: "none", Title: "no budget: spend stops nothing"}
	}
	if sp == nil {
		sp = &projection.Spend{}
	}
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, tokens(sp.Tokens)+" of "+tokens(b.Tokens)+" tok")
	}
	if b.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f of $%.2f", sp.CostUSD, b.CostUSD))
	}
	text := strings.Join(parts, ", ")
	title := "the cost counts what the CLIs reported; the controller adds its estimate of the rest before it decides (controller status)"
	if !b.Stops() {
		text += " (running attempts finish)"
	}
	switch {
	case ended > 0:
		return cell{Text: fmt.Sprintf("exhausted: %s; %d %s ended %s", text, ended, plural(ended, "task", "tasks"), drovertype.ClassBudgetExceeded),
			Class: "err budget-exhausted", Title: "raise the budget (controller budget), then retry: " + title}
	case budgetReached(b, sp):
		return cell{Text: "reached: " + text, Class: "err budget-exhausted", Title: "no new attempt starts: " + title}
	}
	return cell{Text: text, Class: "spend", Title: title}
}

// budgetReached reports whether the spend reported has reached a limit of
// b. The cost is the CLIs' own figures only: the controller's estimate of
// the rest may reach it sooner.
func budgetReached(b *flow.Budget, sp *projection.Spend) bool {
	if !b.Limited() || sp == nil {
		return false
	}
	return b.Tokens > 0 && sp.Tokens >= b.Tokens || b.CostUSD > 0 && sp.CostUSD >= b.CostUSD
}

// budgetEnds counts the tasks of a flow that a budget ended: the flow's,
// or (own) a task's own, which it has reached while the flow's has not.
type budgetEnds struct{ flow, own int }

func (e *budgetEnds) add(f *projection.Flow, t *projection.Task) {
	switch {
	case !budgetEnded(t):
	case !f.Budget.Limited() || budgetReached(t.Budget, t.Spend) && !budgetReached(f.Budget, f.Spend):
		e.own++
	default:
		e.flow++
	}
}

// flowBudgetCell is a flow's budget line: exhausted once its budget ended
// tasks.
func flowBudgetCell(f *projection.Flow, e budgetEnds) cell {
	c := budgetCell(f.Budget, f.Spend, e.flow)
	if e.own > 0 {
		c.Text += fmt.Sprintf("; %d %s ended by %s own", e.own, plural(e.own, "task", "tasks"), plural(e.own, "its", "their"))
		if !strings.HasPrefix(c.Class, "err") {
			c.Class = "err"
		}
	}
	return c
}

// budgetEnded reports whether a task ended because a budget was reached.
func budgetEnded(t *projection.Task) bool {
	return t.State == drovertype.TaskFailed && t.Error != nil && t.Error.Class == drovertype.ClassBudgetExceeded
}

// waitText says why a task does not run, "" when it does not wait: the
// cooldowns in its way and until when, or the pool's runtime that no live
// worker serves for its queued attempt. why is the whole reason, since
// when it began.
func waitText(st *projection.State, t *projection.Task) (text, why string, since time.Time) {
	if w := t.Waiting(); w != nil {
		text = "waiting for " + strings.Join(w.Cooldowns, ", ")
		if !w.Until.IsZero() {
			text += " until " + clock(w.Until)
		} else {
			text += " (awaiting a probe)"
		}
		return oneLine(text, 300), w.Reason, w.Since
	}
	if p := st.Unplaced(t); p != nil {
		why, since := st.WaitWhy(t)
		return oneLine("waiting for a worker: none serves "+p.Runtime+" in pool "+p.Pool, 300), why, since
	}
	return "", "", time.Time{}
}

// waitCell is a task page's Waiting field.
func waitCell(st *projection.State, t *projection.Task) cell {
	text, why, since := waitText(st, t)
	if text == "" {
		return cell{Text: "—"}
	}
	if why != "" {
		text += ": " + oneLine(why, 500)
	}
	return cell{Text: text, Class: "waiting", Title: "since " + since.UTC().Format(time.RFC3339)}
}
