package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// What the operator API shows and changes of limits and budgets: the
// cooldowns in `status` and `runtime health`, spend against budget in
// `status`, and `controller budget`.

// SubjectBudget is the operator API's subject to set a budget.
const SubjectBudget = queue.APIPrefix + ".budget"

// Cooldown states, as status shows them.
const (
	CooldownCooling  = "cooling"   // until Until, nothing in its scope starts
	CooldownHalfOpen = "half_open" // it has ended; one attempt probes it
)

// CooldownStatus is a cooldown that has not been released.
type CooldownStatus struct {
	Key      string   `json:"key"`
	Scope    string   `json:"scope"`
	Name     string   `json:"name"`
	Runtimes []string `json:"runtimes,omitempty"` // a credential's
	State    string   `json:"state"`
	// Until is when it ends (ended, for a half-open one).
	Until time.Time `json:"until"`
	Step  int       `json:"step"`
	// Source says where its length came from (reset_at, retry_after,
	// default); Class and Cause are the limit, met on Runtime by Attempt.
	Source    string                `json:"source"`
	Class     drovertype.ErrorClass `json:"class"`
	Cause     string                `json:"cause"`
	Runtime   string                `json:"runtime"`
	Attempt   string                `json:"attempt"`
	StartedAt time.Time             `json:"started_at"`
	InFlight  int                   `json:"in_flight,omitempty"`
	Limited   int                   `json:"limited"`
	Probe     string                `json:"probe,omitempty"`
}

// cooldowns lists the unreleased cooldowns, by key.
func cooldowns(st *projection.State, now time.Time) []CooldownStatus {
	var out []CooldownStatus
	for _, k := range slices.Sorted(maps.Keys(st.Cooldowns)) {
		c := st.Cooldowns[k]
		if c.Released {
			continue
		}
		s := CooldownStatus{Key: c.Key, Scope: c.Scope, Name: c.Name, Runtimes: c.Runtimes, State: CooldownHalfOpen,
			Until: c.Until, Step: c.Step, Source: c.Source, Class: c.Class, Cause: c.Cause, Runtime: c.Runtime,
			Attempt: c.Attempt, StartedAt: c.StartedAt, InFlight: c.InFlight, Limited: c.Limited, Probe: c.Probe}
		if c.Cooling(now) {
			s.State = CooldownCooling
		}
		out = append(out, s)
	}
	return out
}

// SpendStatus is what a flow or a task spent, against its budget.
type SpendStatus struct {
	Budget *flow.Budget `json:"budget,omitempty"`
	// Tokens are the input and output tokens its attempts reported (a
	// count a CLI did not report counts as none).
	Tokens int64 `json:"tokens"`
	Cost   Cost  `json:"cost"`
	// Attempts counts the reports that carried usage.
	Attempts int `json:"attempts"`
	// Reached says how the budget is reached, "" while it is not.
	Reached string `json:"reached,omitempty"`
}

func spendStatus(cfg *config.Config, what string, b *flow.Budget, sp *projection.Spend) *SpendStatus {
	if b == nil && sp == nil {
		return nil
	}
	s := &SpendStatus{Budget: b, Cost: CostOf(cfg, sp), Reached: reached(cfg, what, b, sp)}
	if sp != nil {
		s.Tokens, s.Attempts = sp.Tokens, sp.Attempts
	}
	return s
}

// BudgetRequest sets the budget of a flow or of one of its tasks: the
// fields given replace the budget's, 0 meaning no limit.
type BudgetRequest struct {
	Target  string   `json:"target"` // FLOW or FLOW/TASK
	Tokens  *int64   `json:"tokens,omitempty"`
	CostUSD *float64 `json:"cost_usd,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// handleBudget records an operator's budget change (budget_set). It does
// not reopen anything: `controller retry` does, once the budget allows.
func (c *Controller) handleBudget(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err != nil {
		c.refuse(r, "budget", err)
		return
	}
	req, t, err := decodeBudget(body)
	if err != nil {
		c.refuse(r, "budget", err)
		return
	}
	var ev *event.Event
	var msg string
	c.store.Read(func(st *projection.State) { ev, msg, err = c.budgetEvent(st, t, &req) })
	if err != nil {
		code := CodeBadRequest
		if nf, ok := err.(notFound); ok {
			code, err = CodeNotFound, nf
		}
		_ = r.Error(code, err.Error(), nil)
		return
	}
	if err := c.record(ctx, ev); err != nil {
		c.writeFailed(r, err)
		return
	}
	c.log.Info("operator request", "type", ev.Type, "flow", ev.Flow, "task", ev.Task, "reason", req.Reason)
	c.respondJSON(ctx, r, OperatorResponse{Flow: ev.Flow, Task: ev.Task, Event: string(ev.Type), Message: msg})
}

// checkBudgetLimits checks the limits a budget request sets.
func checkBudgetLimits(req *BudgetRequest) error {
	if req.Tokens == nil && req.CostUSD == nil {
		return errors.New("give --tokens, --cost-usd or both (0 removes a limit)")
	}
	b := flow.Budget{}
	if req.Tokens != nil {
		b.Tokens = *req.Tokens
	}
	if req.CostUSD != nil {
		b.CostUSD = *req.CostUSD
	}
	return flow.CheckBudget(&b)
}

// budgetEvent checks a budget request against the folded state and builds
// its event, with what the new budget means for the operator.
func (c *Controller) budgetEvent(st *projection.State, t Target, req *BudgetRequest) (*event.Event, string, error) {
	f, err := findFlow(st, t)
	if err != nil {
		return nil, "", err
	}
	what, old, sp := "flow "+f.ID, f.Budget, f.Spend
	if t.Task != "" {
		_, task, err := findTask(st, t)
		if err != nil {
			return nil, "", err
		}
		what, old, sp = "task "+t.Task+" of flow "+f.ID, task.Budget, task.Spend
	}
	b := flow.Budget{}
	if old != nil {
		b = *old
	}
	if req.Tokens != nil {
		b.Tokens = *req.Tokens
	}
	if req.CostUSD != nil {
		b.CostUSD = *req.CostUSD
	}
	s := spendStatus(c.cfg, "its", &b, sp)
	msg := fmt.Sprintf("%s: budget %s; spent %s", what, describeBudget(&b), describeSpend(s))
	switch {
	case s.Reached != "":
		msg += fmt.Sprintf(" — still reached (%s): nothing of it will start", s.Reached)
	case budgetFailed(st, f, t.Task):
		msg += fmt.Sprintf("; `controller retry %s` resumes the tasks its budget ended", f.ID)
	}
	ev, err := event.New(drovertype.EventID(event.BudgetSet, randomSuffix()), event.BudgetSet, c.now(), f.ID, t.Task, "", 0,
		event.BudgetSetData{Tokens: req.Tokens, CostUSD: req.CostUSD, Reason: req.Reason})
	return ev, msg, err
}

// budgetFailed reports whether a task of the flow (task, or any) ended as
// BUDGET_EXCEEDED.
func budgetFailed(st *projection.State, f *projection.Flow, task string) bool {
	for _, t := range st.FlowTasks(f) {
		if (task == "" || t.ID == task) && t.State == drovertype.TaskFailed && t.Error != nil && t.Error.Class == drovertype.ClassBudgetExceeded {
			return true
		}
	}
	return false
}

// describeBudget prints a budget for people: "none" when it limits nothing.
func describeBudget(b *flow.Budget) string {
	if !b.Limited() {
		return "none"
	}
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", b.CostUSD))
	}
	s := strings.Join(parts, ", ")
	if !b.Stops() {
		s += " (running attempts finish)"
	}
	return s
}

// describeSpend prints a spend for people.
func describeSpend(s *SpendStatus) string {
	if s == nil {
		return "nothing"
	}
	out := fmt.Sprintf("%d tokens, $%.4f", s.Tokens, s.Cost.USD)
	if s.Cost.Estimated > 0 {
		out += fmt.Sprintf(" ($%.4f estimated)", s.Cost.Estimated)
	}
	if s.Cost.Unpriced > 0 {
		out += fmt.Sprintf(", %d tokens of unpriced models", s.Cost.Unpriced)
	}
	return out
}

// SpendLine is a flow's or task's spend against its budget in one line,
// for `controller status`.
func SpendLine(s *SpendStatus) string {
	if s == nil {
		return ""
	}
	line := "spent " + describeSpend(s)
	if s.Budget.Limited() {
		line += " of budget " + describeBudget(s.Budget)
	}
	if s.Reached != "" {
		line += ": REACHED"
	}
	return line
}

// Budget sets a flow's or a task's budget.
func (cl *Client) Budget(ctx context.Context, req BudgetRequest) (*OperatorResponse, error) {
	body, err := json.Marshal(req)
	if err == nil {
		_, _, err = decodeBudget(body)
	}
	if err != nil {
		return nil, refusedHere(err)
	}
	var resp OperatorResponse
	err = cl.call(ctx, SubjectBudget, req, &resp)
	return &resp, err
}
