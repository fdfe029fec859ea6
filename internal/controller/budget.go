package controller

import (
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// Budgets (docs/flows.md#budgets): what a flow's or a task's attempts
// reported using, against what its budget allows. Once it is reached no
// attempt starts, the running ones are stopped (or finish, as the budget
// says), and the tasks left end as BUDGET_EXCEEDED.

// Cost is what a spend cost in US dollars: the CLIs' own figures plus an
// estimate, from cfg's pricing, of the usage they reported without one.
type Cost struct {
	USD       float64 `json:"usd"`
	Estimated float64 `json:"estimated_usd,omitempty"` // the part of USD that is an estimate
	// Unpriced counts the tokens of models the pricing table does not
	// know: they cost nothing here.
	Unpriced int64 `json:"unpriced_tokens,omitempty"`
}

// CostOf prices a spend.
func CostOf(cfg *config.Config, sp *projection.Spend) Cost {
	var c Cost
	if sp == nil {
		return c
	}
	c.USD = sp.CostUSD
	for model, u := range sp.Unpriced {
		p, ok := cfg.PriceOf(model)
		if !ok || model == "" {
			c.Unpriced += u.Input + u.Output + u.CacheRead + u.CacheWrite
			continue
		}
		e := (float64(u.Input)*p.Input + float64(u.Output)*p.Output + float64(u.CacheRead)*p.CacheRead +
			float64(u.CacheWrite)*p.CacheWrite) / 1e6
		c.USD += e
		c.Estimated += e
	}
	return c
}

// reached says how a spend reached a budget, "" when it has not.
func reached(cfg *config.Config, what string, b *flow.Budget, sp *projection.Spend) string {
	if !b.Limited() || sp == nil {
		return ""
	}
	var parts []string
	if b.Tokens > 0 && sp.Tokens >= b.Tokens {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", sp.Tokens, b.Tokens))
	}
	if b.CostUSD > 0 {
		if c := CostOf(cfg, sp); c.USD >= b.CostUSD {
			s := fmt.Sprintf("$%.4f of $%.2f", c.USD, b.CostUSD)
			if c.Estimated > 0 {
				s += fmt.Sprintf(" ($%.4f of it estimated)", c.Estimated)
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return what + " budget reached: " + strings.Join(parts, ", ")
}

// budgetReached says which budget a task can no longer run within, its
// flow's or its own, and that budget; "" and nil when both still allow it.
func budgetReached(cfg *config.Config, f *projection.Flow, t *projection.Task) (string, *flow.Budget) {
	if why := reached(cfg, "the flow's", f.Budget, f.Spend); why != "" {
		return why, f.Budget
	}
	if why := reached(cfg, "the task's", t.Budget, t.Spend); why != "" {
		return why, t.Budget
	}
	return "", nil
}

// budget ends a task that its budget, or its flow's, no longer covers; it
// reports whether the task needs nothing more this round. The task fails
// as BUDGET_EXCEEDED, after its failed attempt is classified; an attempt
// that runs is stopped, unless the budget lets running attempts finish, and
// then the task waits for it. A queued one never starts.
func (dc *decider) budget(f *projection.Flow, t *projection.Task, a *projection.Attempt) (bool, error) {
	why, b := budgetReached(dc.c.cfg, f, t)
	if why == "" {
		return false, nil
	}
	if t.State.Terminal() {
		if a == nil || t.Error == nil || t.Error.Class != drovertype.ClassBudgetExceeded {
			return false, nil
		}
		switch {
		case b.Stops():
			dc.out = append(dc.out, action{stop: a, reason: "stopped: " + why})
		case a.State == drovertype.AttemptScheduled:
			dc.out = append(dc.out, action{withdraw: a, reason: why})
		}
		return true, nil
	}
	if at := dc.st.Attempts[t.Attempt]; at != nil && at.State == drovertype.AttemptFailed && at.Error == nil {
		return false, nil // classified first, so the log says how it failed
	}
	if a != nil && a.State == drovertype.AttemptClaimed && !b.Stops() {
		return true, nil // it finishes; the task ends with it
	}
	id := fmt.Sprintf("%s/%s:budget:r%d", f.ID, t.ID, t.Round)
	return true, dc.add(id, event.TaskFailed, f.ID, t.ID, t.Attempt, event.TaskFailedData{Reason: why, Class: drovertype.ClassBudgetExceeded})
}
