package controller

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// TestBudgetAPI runs the operator's side of budgets against a live
// controller: a flow its budget stops shows spend against budget in
// status; retry is refused until the budget is raised (controller
// budget); then retrying the flow reopens every task its budget ended.
// Bad requests are refused with what is wrong.
func TestBudgetAPI(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	cl := &Client{NC: h.nc}
	ctx := context.Background()
	spec := &flow.Spec{Name: "b", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", MaxParallel: 1,
		Budget: &flow.Budget{Tokens: 100},
		Tasks:  []flow.Task{{ID: "a", Prompt: "p"}, {ID: "b", Prompt: "p"}, {ID: "c", Prompt: "p", DependsOn: []string{"b"}}}}
	id, err := cl.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	a1 := drovertype.AttemptID(id, "a", 1)
	h.waitFor("a's attempt", func(st *projection.State) bool { return st.Attempts[a1] != nil })
	h.publish(event.AttemptClaimed, id, "a", a1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", a1, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "c1",
		Usage: &event.Usage{InputTokens: new(int64(90)), OutputTokens: new(int64(30))}})
	h.waitFor("b and c to end", func(st *projection.State) bool {
		b, c := st.Task(id, "b"), st.Task(id, "c")
		return b.State == drovertype.TaskFailed && c.State == drovertype.TaskBlocked
	})

	st, err := cl.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Detail.Spend; s == nil || s.Tokens != 120 || s.Budget.Tokens != 100 || !strings.Contains(s.Reached, "120 of 100 tokens") {
		t.Errorf("status spend %+v", s)
	}
	for _, task := range st.Detail.Tasks {
		if task.ID == "b" && (task.Error == nil || task.Error.Class != drovertype.ClassBudgetExceeded) {
			t.Errorf("task b ended %+v, want BUDGET_EXCEEDED", task.Error)
		}
	}
	all, err := cl.Status(ctx, "")
	if err != nil || len(all.Flows) != 1 || all.Flows[0].Spend == nil || all.Flows[0].Spend.Tokens != 120 {
		t.Fatalf("status of all flows: %+v %v", all, err)
	}

	// Retrying while the budget is spent is refused, for the flow and the task.
	for _, target := range []string{id, id + "/b", id + "/c"} {
		if _, err := cl.Retry(ctx, target, ""); !isAPIError(err, CodeBadRequest, "budget reached") {
			t.Errorf("retry %s while over budget: %v", target, err)
		}
	}
	for _, c := range []struct {
		req  BudgetRequest
		code string
		want string
	}{
		{BudgetRequest{Target: id}, CodeBadRequest, "give --tokens, --cost-usd or both"},
		{BudgetRequest{Target: id, Tokens: ptr(int64(-1))}, CodeBadRequest, "budget.tokens: -1 is out of range"},
		{BudgetRequest{Target: id, CostUSD: ptr(2e9)}, CodeBadRequest, "budget.cost_usd"},
		{BudgetRequest{Target: drovertype.AttemptID(id, "a", 1), Tokens: ptr(int64(5))}, CodeBadRequest, "not an attempt"},
		{BudgetRequest{Target: "nosuch", Tokens: ptr(int64(5))}, CodeNotFound, "no flow nosuch"},
		{BudgetRequest{Target: id + "/zz", Tokens: ptr(int64(5))}, CodeNotFound, "has no task zz"},
		{BudgetRequest{Target: "bad.id", Tokens: ptr(int64(5))}, CodeBadRequest, "flow id"},
	} {
		if _, err := cl.Budget(ctx, c.req); !isAPIError(err, c.code, c.want) {
			t.Errorf("budget %+v: %v, want %s %q", c.req, err, c.code, c.want)
		}
	}
	resp, err := cl.Budget(ctx, BudgetRequest{Target: id, Tokens: ptr(int64(110)), Reason: "a little more"})
	if err != nil || !strings.Contains(resp.Message, "still reached") {
		t.Errorf("a raise that falls short: %+v %v", resp, err)
	}
	resp, err = cl.Budget(ctx, BudgetRequest{Target: id, Tokens: ptr(int64(1000)), CostUSD: ptr(2.5)})
	if err != nil || !strings.Contains(resp.Message, "budget 1000 tokens, $2.50") || !strings.Contains(resp.Message, "controller retry "+id) {
		t.Fatalf("raise: %+v %v", resp, err)
	}
	resp, err = cl.Retry(ctx, id, "budget raised")
	if err != nil || !strings.Contains(resp.Message, "retrying 1 tasks of flow "+id+": b") {
		t.Fatalf("retry %s: %+v %v", id, resp, err)
	}
	b2 := drovertype.AttemptID(id, "b", 1)
	h.waitFor("b to run again", func(st *projection.State) bool {
		return st.Attempts[b2] != nil && st.Task(id, "c").State == drovertype.TaskPending && st.Flows[id].Budget.CostUSD == 2.5
	})
	if _, err := cl.Retry(ctx, id, ""); !isAPIError(err, CodeBadRequest, "no failed or cancelled task") {
		t.Errorf("retry with nothing to retry: %v", err)
	}
}

// TestStatusCooldowns: status shows the cooldowns that hold back runtimes,
// cooling until their end, then half-open.
func TestStatusCooldowns(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	h.setup = func(c *Controller) { c.now = func() time.Time { return now } }
	h.start(filepath.Join(t.TempDir(), "state"))
	id, att := h.submitOne()
	h.waitFor("the attempt", func(st *projection.State) bool { return st.Attempts[att] != nil })
	h.publish(event.CooldownStarted, id, "a", att, 0, event.CooldownStartedData{
		Scope: event.CooldownCredential, Name: "k1", Runtimes: []string{"demo", "other"}, Runtime: "demo", Step: 1,
		From: now, Until: now.Add(time.Minute), Source: event.CooldownRetryAfter, Class: drovertype.ClassRateLimited, Cause: "429 slow down"})
	h.waitFor("the cooldown", func(st *projection.State) bool { return len(st.Cooldowns) == 1 })
	st, err := (&Client{NC: h.nc}).Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Cooldowns) != 1 {
		t.Fatalf("cooldowns %+v", st.Cooldowns)
	}
	c := st.Cooldowns[0]
	if c.Key != "credential:k1" || c.State != CooldownCooling || !c.Until.Equal(now.Add(time.Minute).UTC()) || c.Cause != "429 slow down" ||
		strings.Join(c.Runtimes, ",") != "demo,other" {
		t.Errorf("cooldown %+v", c)
	}
	var later []CooldownStatus
	h.store.Read(func(st *projection.State) { later = cooldowns(st, now.Add(2*time.Minute)) })
	if len(later) != 1 || later[0].State != CooldownHalfOpen {
		t.Errorf("after its end: %+v", later)
	}
}

func ptr[T any](v T) *T { return &v }

func isAPIError(err error, code, substr string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code && strings.Contains(ae.Message, substr)
}
