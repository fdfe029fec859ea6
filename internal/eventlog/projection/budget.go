package projection

import (
	"fmt"
	"math"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/flow"
)

// Spend is what a flow's or a task's attempts reported using, summed as
// their reports are folded. A count the CLI did not report is counted as
// nothing. The fold knows no prices: the cost of usage a CLI reported
// without a cost is estimated by the controller from its pricing table
// (Unpriced), so that the projection stays a pure function of the log.
type Spend struct {
	// Tokens are the input and output tokens reported.
	Tokens int64 `json:"tokens,omitempty"`
	// CostUSD is the sum of the costs the CLIs reported themselves.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Unpriced is the usage of the attempts whose CLI reported no cost,
	// by model ("" when the CLI named none).
	Unpriced map[string]*Tokens `json:"unpriced,omitempty"`
	// Attempts counts the reports that carried usage.
	Attempts int `json:"attempts,omitempty"`
	// Unreported counts the reports that carried usage with a count or
	// cost missing: their CLI did not say, so the spend above is a floor.
	Unreported int `json:"unreported,omitempty"`
}

// Tokens is token usage by kind.
type Tokens struct {
	Input      int64 `json:"input,omitempty"`
	Output     int64 `json:"output,omitempty"`
	CacheRead  int64 `json:"cache_read,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
}

// maxUnpricedModels bounds the models a Spend keeps apart; the usage of any
// more is counted under the model "" (unknown, so unpriced).
const maxUnpricedModels = 32

// addSpend adds a report's usage to its task's and its flow's spend. A
// count the CLI did not report is unknown, not zero: it adds nothing, and
// the spend says that some usage went unreported.
func (s *State) addSpend(a *Attempt, u *event.Usage) {
	if u == nil {
		return
	}
	model := a.Model
	if u.Model != "" {
		model = u.Model // what the CLI says it ran, over what it was asked for
	}
	if f := s.Flows[a.Flow]; f != nil {
		f.Spend = f.Spend.add(u, model)
		s.mark(keyFlow + f.ID)
	}
	if t := s.Task(a.Flow, a.Task); t != nil {
		t.Spend = t.Spend.add(u, model)
		s.mark(keyTask + TaskKey(t.Flow, t.ID))
	}
}

// add returns sp with u added; sp is not changed (a nil sp is empty).
func (sp *Spend) add(u *event.Usage, model string) *Spend {
	out := &Spend{}
	if sp != nil {
		*out = *sp
		out.Unpriced = make(map[string]*Tokens, len(sp.Unpriced))
		for m, t := range sp.Unpriced {
			c := *t
			out.Unpriced[m] = &c
		}
	}
	out.Attempts++
	if u.InputTokens == nil || u.OutputTokens == nil {
		out.Unreported++
	}
	out.Tokens = sum(out.Tokens, u.InputTokens, u.OutputTokens)
	if c := u.CostUSD; c != nil && *c > 0 && !math.IsInf(*c, 0) {
		out.CostUSD += *c
		return out
	}
	if out.Unpriced == nil {
		out.Unpriced = map[string]*Tokens{}
	}
	if _, ok := out.Unpriced[model]; !ok && len(out.Unpriced) >= maxUnpricedModels {
		model = ""
	}
	t := out.Unpriced[model]
	if t == nil {
		t = &Tokens{}
		out.Unpriced[model] = t
	}
	t.Input = sum(t.Input, u.InputTokens)
	t.Output = sum(t.Output, u.OutputTokens)
	t.CacheRead = sum(t.CacheRead, u.CacheReadTokens)
	t.CacheWrite = sum(t.CacheWrite, u.CacheWriteTokens)
	return out
}

// sum adds counts, ignoring unknown (nil) and negative ones and
// saturating: reports come from workers, and a count cannot take a sum
// down or wrap it.
func sum(total int64, counts ...*int64) int64 {
	for _, c := range counts {
		if c == nil || *c <= 0 {
			continue
		}
		n := *c
		if total > math.MaxInt64-n {
			return math.MaxInt64
		}
		total += n
	}
	return total
}

// budgetSet applies an operator's change of a flow's or a task's budget.
// It applies to a flow that has ended too: raising the budget of a flow
// its budget stopped comes before retrying its tasks.
func (s *State) budgetSet(ev *event.Event, d *event.BudgetSetData) error {
	// Checked before the state is looked at: whether the event is poison
	// depends on its bytes alone.
	if d.Tokens == nil && d.CostUSD == nil {
		return fmt.Errorf("%w: budget_set sets nothing", event.ErrDecode)
	}
	check := flow.Budget{}
	if d.Tokens != nil {
		check.Tokens = *d.Tokens
	}
	if d.CostUSD != nil {
		check.CostUSD = *d.CostUSD
	}
	if err := flow.CheckBudget(&check); err != nil {
		return fmt.Errorf("%w: budget_set: %v", event.ErrDecode, err)
	}
	f := s.Flows[ev.Flow]
	if f == nil {
		return nil
	}
	target := &f.Budget
	if ev.Task != "" {
		t := s.Task(ev.Flow, ev.Task)
		if t == nil {
			return nil
		}
		target = &t.Budget
		defer s.touchTask(t, ev)
	} else {
		s.mark(keyFlow + f.ID)
	}
	b := flow.Budget{}
	if *target != nil {
		b = **target
	}
	if d.Tokens != nil {
		b.Tokens = *d.Tokens
	}
	if d.CostUSD != nil {
		b.CostUSD = *d.CostUSD
	}
	*target = &b // a new budget: the old one may be the flow file's
	return nil
}
