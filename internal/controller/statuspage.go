package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// A flow's status comes in pages: the flow's summary (its record, spend,
// the counts of its tasks by state, why its tasks wait) whole with every
// page, and its tasks' rows, with their attempts, at most a page's limit
// at a time. A request with a limit asks for a page; one without (what a
// client older than pages sends) gets every task in one answer, as before.
//
// A page's rows are in the flow's order (dependencies first), which only
// grows (a review round appends its tasks), so a cursor is a place in it:
// the last row shown, FLOW/TASK. A walk from the first page to the last
// shows every task at most once, and exactly once each task that matches
// its filter all along; one that changes state while the walk is past it
// is shown as it was, and one that comes into the filter behind the walk
// is not shown. The summary is of the moment each page is read.

// Page limits: what the CLI asks for when not told, and the most one
// answer holds.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// FilterWaiting selects the tasks that wait (FlowDetail.Waiting),
// whatever their state; the other filters are task states.
const FilterWaiting = "waiting"

// taskStates are the states a page's filter may name.
var taskStates = []drovertype.TaskState{drovertype.TaskPending, drovertype.TaskScheduled, drovertype.TaskRunning,
	drovertype.TaskRetrying, drovertype.TaskSucceeded, drovertype.TaskFailed, drovertype.TaskBlocked, drovertype.TaskCancelled}

// TaskStates are the task states, in a task's life's order.
func TaskStates() []drovertype.TaskState { return slices.Clone(taskStates) }

// maxWaitReasons bounds the reasons a page's summary lists.
const maxWaitReasons = 20

// TaskPage is what a page of a flow's tasks says of the whole flow, and
// where the page is in it.
type TaskPage struct {
	// Tasks is the flow's number of tasks, Counts them by state.
	Tasks  int                          `json:"tasks"`
	Counts map[drovertype.TaskState]int `json:"counts"`
	// Waiting is the number of tasks that wait; Waits why, by reason,
	// those with the most tasks first (at most 20 reasons).
	Waiting int         `json:"waiting"`
	Waits   []WaitGroup `json:"waits,omitempty"`
	// Matching is the number of tasks the request's filter selects (every
	// task without one), Before those of them before the page.
	Matching int `json:"matching"`
	Before   int `json:"before"`
	// Next is the cursor (after) of the next page, "" on the last.
	Next string `json:"next,omitempty"`
}

// After is the number of matching tasks after the page that holds rows.
func (p *TaskPage) After(rows int) int { return max(0, p.Matching-p.Before-rows) }

// WaitGroup is one reason tasks wait for, with how many do, since when,
// and the first of them in the flow's order.
type WaitGroup struct {
	Reason string    `json:"reason"`
	Tasks  int       `json:"tasks"`
	First  string    `json:"first"`
	Since  time.Time `json:"since"`
}

// Paged reports whether the request asks for a page of the flow's tasks.
func (r StatusRequest) Paged() bool { return r.Limit > 0 }

// checkPage is what the Client and the controller check of a request's
// page members.
func (r StatusRequest) checkPage() error {
	if !r.Paged() {
		switch {
		case r.Limit < 0:
			return badRequest("status request: limit: %d; a page holds 1 to %d tasks", r.Limit, MaxPageLimit)
		case r.After != "":
			return badRequest("status request: after: only with limit (a page of the flow's tasks)")
		case r.States != nil:
			return badRequest("status request: states: only with limit (a page of the flow's tasks)")
		case r.Tasks != nil:
			return badRequest("status request: tasks: only with limit (a page of the flow's tasks)")
		}
		return nil
	}
	if r.Flow == "" {
		return badRequest("status request: limit: only with flow (the list of flows is not paged)")
	}
	if r.Limit > MaxPageLimit {
		return badRequest("status request: limit: %d; a page holds 1 to %d tasks (walk the rest with after)", r.Limit, MaxPageLimit)
	}
	if err := r.checkAfter(); err != nil {
		return err
	}
	if err := checkFilters(r.States); err != nil {
		return err
	}
	if len(r.Tasks) > MaxPageLimit {
		return badRequest("status request: tasks: %d ids; at most %d", len(r.Tasks), MaxPageLimit)
	}
	for _, id := range r.Tasks {
		if err := drovertype.ValidID(id); err != nil {
			return badRequest("status request: tasks: %v", err)
		}
	}
	return nil
}

// checkAfter checks the cursor's form: FLOW/TASK, of the flow asked for.
func (r StatusRequest) checkAfter() error {
	if r.After == "" {
		return nil
	}
	flowID, task, ok := strings.Cut(r.After, "/")
	if !ok {
		return badRequest("status request: after: %.80q is not a cursor (FLOW/TASK, a page's next)", r.After)
	}
	if err := drovertype.ValidID(flowID); err != nil {
		return badRequest("status request: after: flow: %v", err)
	}
	if err := drovertype.ValidID(task); err != nil {
		return badRequest("status request: after: task: %v", err)
	}
	if flowID != r.Flow {
		return badRequest("status request: after: %q is a cursor of flow %s, not of %s", r.After, flowID, r.Flow)
	}
	return nil
}

// checkFilters checks a page's state filters: task states or "waiting",
// each once.
func checkFilters(states []string) error {
	for i, s := range states {
		if s != FilterWaiting && !slices.Contains(taskStates, drovertype.TaskState(s)) {
			return badRequest("status request: states: %.40q is not a task state (%s or %s)", s, joinStates(), FilterWaiting)
		}
		if slices.Contains(states[:i], s) {
			return badRequest("status request: states: %s is listed twice", s)
		}
	}
	return nil
}

func joinStates() string {
	var s []string
	for _, st := range taskStates {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// decodePage reads a status request's page members into r.
func decodePage(m map[string]jsontext.Value, r *StatusRequest) error {
	const what = "status"
	limit, err := wholeMember(what, m, "limit")
	if err != nil {
		return err
	}
	if limit != nil {
		if *limit < 1 || *limit > MaxPageLimit {
			return badRequest("status request: limit: %d; a page holds 1 to %d tasks", *limit, MaxPageLimit)
		}
		r.Limit = int(*limit)
	}
	if r.After, err = stringMember(what, m, "after"); err != nil {
		return err
	}
	if r.States, err = stringsMember(what, m, "states", len(taskStates)+1); err != nil {
		return err
	}
	r.Tasks, err = stringsMember(what, m, "tasks", MaxPageLimit)
	return err
}

// stringsMember returns member name of m, a list of at most n strings;
// nil when absent or null.
func stringsMember(what string, m map[string]jsontext.Value, name string, n int) ([]string, error) {
	v, ok := m[name]
	if !ok || v.Kind() == 'n' {
		return nil, nil
	}
	if v.Kind() != '[' {
		return nil, badRequest("%s request: %s: must be a list of strings, got %s", what, name, flow.JSONKindName(v.Kind()))
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, badRequest("%s request: %s: must be a list of strings", what, name)
	}
	if len(raw) > n {
		return nil, badRequest("%s request: %s: %d entries; at most %d", what, name, len(raw), n)
	}
	out := make([]string, 0, len(raw))
	for _, e := range raw {
		var s string
		if jsontext.Value(e).Kind() != '"' || json.Unmarshal(e, &s) != nil {
			return nil, badRequest("%s request: %s: must be a list of strings, got %s in it", what, name, flow.JSONKindName(jsontext.Value(e).Kind()))
		}
		out = append(out, s)
	}
	return out, nil
}

// pageSelection is a page chosen from a flow's tasks.
type pageSelection struct {
	rows    []*projection.Task
	waiting map[string]*WaitStatus // the rows' waits
	page    *TaskPage
}

// selectPage chooses req's page from a flow's tasks, in the flow's order;
// why says why a task waits ("" when it does not). A cursor naming a task
// the flow does not have is refused.
func selectPage(flowID string, tasks []*projection.Task, why func(*projection.Task) (string, time.Time), req StatusRequest) (*pageSelection, error) {
	start := 0
	if req.After != "" {
		_, task, _ := strings.Cut(req.After, "/")
		i := slices.IndexFunc(tasks, func(t *projection.Task) bool { return t.ID == task })
		if i < 0 {
			return nil, badRequest("status request: after: flow %s has no task %s", flowID, task)
		}
		start = i + 1
	}
	sel := &pageSelection{page: &TaskPage{Tasks: len(tasks), Counts: map[drovertype.TaskState]int{}}}
	p := sel.page
	groups := map[string]*WaitGroup{}
	for i, t := range tasks {
		p.Counts[t.State]++
		reason, since := why(t)
		if reason != "" {
			p.Waiting++
			g := groups[reason]
			if g == nil {
				g = &WaitGroup{Reason: reason, First: t.ID, Since: since}
				groups[reason] = g
			}
			g.Tasks++
			if since.Before(g.Since) {
				g.Since = since
			}
		}
		if !matches(t, reason != "", req) {
			continue
		}
		p.Matching++
		switch {
		case i < start:
			p.Before++
		case len(sel.rows) < req.Limit:
			sel.rows = append(sel.rows, t)
			if reason != "" {
				if sel.waiting == nil {
					sel.waiting = map[string]*WaitStatus{}
				}
				sel.waiting[t.ID] = &WaitStatus{Reason: reason, Since: since}
			}
		case p.Next == "":
			p.Next = flowID + "/" + sel.rows[len(sel.rows)-1].ID
		}
	}
	p.Waits = waitGroups(groups)
	return sel, nil
}

// matches reports whether a task is one the request's filters select.
func matches(t *projection.Task, waits bool, req StatusRequest) bool {
	if req.Tasks != nil && !slices.Contains(req.Tasks, t.ID) {
		return false
	}
	if req.States == nil {
		return true
	}
	return slices.Contains(req.States, string(t.State)) || waits && slices.Contains(req.States, FilterWaiting)
}

// waitGroups are the reasons tasks wait for, those with most tasks first,
// at most maxWaitReasons.
func waitGroups(groups map[string]*WaitGroup) []WaitGroup {
	var out []WaitGroup
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b WaitGroup) int {
		return cmp.Or(cmp.Compare(b.Tasks, a.Tasks), cmp.Compare(a.Reason, b.Reason))
	})
	return out[:min(len(out), maxWaitReasons)]
}

// pageMerges keeps, of what head's integration and pull request merged,
// the page's tasks' results: the whole is a line per succeeded task (13 MB
// for 100,000), which a page must not carry. head is a copy of the flow;
// the projection's records are copied before they are cut.
func pageMerges(head *projection.Flow, rows []*projection.Task) {
	onPage := make(map[string]bool, len(rows))
	for _, t := range rows {
		onPage[t.ID] = true
	}
	if in := head.Integration; in != nil && len(in.Merge) > 0 {
		cut := *in
		cut.Merge = slices.DeleteFunc(slices.Clone(in.Merge), func(m event.DepResult) bool { return !onPage[m.Task] })
		head.Integration = &cut
	}
	if pr := head.PR; pr != nil && len(pr.Merged) > 0 {
		cut := *pr
		cut.Merged = slices.DeleteFunc(slices.Clone(pr.Merged), func(k string) bool {
			task, _, _ := strings.Cut(k, "@")
			return !onPage[task]
		})
		head.PR = &cut
	}
}

// flowPage is one page of a flow's tasks, with their attempts, and the
// flow's summary, copied out of the projection.
func flowPage(cfg *config.Config, st *projection.State, f *projection.Flow, req StatusRequest) (*FlowDetail, error) {
	sel, err := selectPage(f.ID, st.OrderedTasks(f), st.WaitWhy, req)
	if err != nil {
		return nil, err
	}
	head := *f
	head.Order, head.Spec.Tasks = nil, nil
	for _, t := range sel.rows {
		if spec := st.TaskSpec(f, t.ID); spec != nil {
			head.Spec.Tasks = append(head.Spec.Tasks, *spec)
		}
	}
	pageMerges(&head, sel.rows)
	d := &FlowDetail{Spend: spendStatus(cfg, "the flow's", f.Budget, f.Spend), Waiting: sel.waiting, Page: sel.page,
		raw: &rawRecords{flow: encode(&head), tasks: []json.RawMessage{}, attempts: []json.RawMessage{}}}
	for _, t := range sel.rows {
		d.raw.tasks = append(d.raw.tasks, encode(t))
		if s := spendStatus(cfg, "the task's", t.Budget, t.Spend); s != nil {
			if d.TaskSpend == nil {
				d.TaskSpend = map[string]*SpendStatus{}
			}
			d.TaskSpend[t.ID] = s
		}
		for n := 1; n <= t.Attempts; n++ {
			if a := st.Attempts[drovertype.AttemptID(f.ID, t.ID, n)]; a != nil {
				d.raw.attempts = append(d.raw.attempts, encode(a))
			}
		}
	}
	return d, nil
}

// StatusPage asks for one page of a flow's tasks (req.Limit of them, from
// req.After). A controller older than pages refuses a page's members; the
// first page asked of one (no After: the Client checked everything else
// the controller would) is asked again without them, and the page cut
// from the whole flow here, so that a mixed group answers alike.
func (cl *Client) StatusPage(ctx context.Context, req StatusRequest) (*StatusResponse, error) {
	if !req.Paged() {
		return nil, refusedHere(badRequest("status request: limit: required for a page: 1 to %d", MaxPageLimit))
	}
	if err := req.check(); err != nil {
		return nil, refusedHere(err)
	}
	var resp StatusResponse
	err := cl.call(ctx, cl.read(SubjectStatus), req, &resp)
	var apiErr *APIError
	if req.After == "" && errors.As(err, &apiErr) && apiErr.Code == CodeBadRequest {
		whole, werr := cl.Status(ctx, req.Flow)
		if werr != nil {
			return nil, werr
		}
		return cutPage(whole, req)
	}
	if err == nil && (resp.Detail == nil || resp.Detail.Page == nil) {
		return nil, fmt.Errorf("controller: status of %s: the answer has no page of its tasks", req.Flow)
	}
	return &resp, err
}

// cutPage is req's page of a whole flow's status, as a controller that
// pages would answer it; it keeps the whole for the walk's next pages.
func cutPage(whole *StatusResponse, req StatusRequest) (*StatusResponse, error) {
	d := whole.Detail
	if d == nil || d.Flow == nil {
		return nil, fmt.Errorf("controller: status of %s: the answer has no detail", req.Flow)
	}
	why := func(t *projection.Task) (string, time.Time) {
		if w := d.Waiting[t.ID]; w != nil {
			return w.Reason, w.Since
		}
		return "", time.Time{}
	}
	sel, err := selectPage(d.Flow.ID, d.Tasks, why, req)
	if err != nil {
		return nil, refusedHere(err)
	}
	resp := *whole
	resp.whole = whole
	head := *d.Flow
	head.Order, head.Spec.Tasks = nil, nil
	page := &FlowDetail{Flow: &head, Spend: d.Spend, Waiting: sel.waiting, Page: sel.page,
		Tasks: sel.rows, Attempts: []*projection.Attempt{}}
	for _, t := range sel.rows {
		if spec, ok := d.Flow.Spec.Task(t.ID); ok {
			head.Spec.Tasks = append(head.Spec.Tasks, *spec)
		}
		if s := d.TaskSpend[t.ID]; s != nil {
			if page.TaskSpend == nil {
				page.TaskSpend = map[string]*SpendStatus{}
			}
			page.TaskSpend[t.ID] = s
		}
	}
	for _, a := range d.Attempts {
		if slices.ContainsFunc(sel.rows, func(t *projection.Task) bool { return t.ID == a.Task }) {
			page.Attempts = append(page.Attempts, a)
		}
	}
	resp.Detail = page
	return &resp, nil
}

// WalkTasks calls fn with each page of req's tasks, from req.After to the
// last page, until fn returns an error. Every page after the first is
// asked of the controller that answered the first (its projection, not
// another's a few events behind or ahead).
func (cl *Client) WalkTasks(ctx context.Context, req StatusRequest, fn func(*StatusResponse) error) error {
	resp, err := cl.StatusPage(ctx, req)
	if err != nil {
		return err
	}
	pinned := *cl
	if cl.Controller == "" && drovertype.ValidID(resp.Controller) == nil {
		pinned.Controller = resp.Controller
	}
	for {
		if err := fn(resp); err != nil {
			return err
		}
		if resp.Detail.Page.Next == "" {
			return nil
		}
		req.After = resp.Detail.Page.Next
		if resp.whole != nil {
			resp, err = cutPage(resp.whole, req)
		} else {
			resp, err = pinned.StatusPage(ctx, req)
		}
		if errors.Is(err, ErrNoController) && pinned.Controller != cl.Controller {
			return fmt.Errorf("controller: controller %s, which answered this walk's first page, stopped answering: walk again: %w", pinned.Controller, err)
		}
		if err != nil {
			return err
		}
	}
}
