package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// walkLocal walks tasks (read again for every page, as a controller reads
// its projection) with selectPage, and returns the ids shown in order.
func walkLocal(t *testing.T, flowID string, tasks func() []*projection.Task, req StatusRequest, between func(page int)) []string {
	t.Helper()
	var shown []string
	for page := 0; ; page++ {
		sel, err := selectPage(flowID, tasks(), func(*projection.Task) (string, time.Time) { return "", time.Time{} }, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sel.rows {
			shown = append(shown, r.ID)
		}
		if sel.page.Next == "" {
			return shown
		}
		if len(sel.rows) != req.Limit {
			t.Fatalf("page %d: %d rows and a next page; the limit is %d", page, len(sel.rows), req.Limit)
		}
		req.After = sel.page.Next
		if between != nil {
			between(page)
		}
	}
}

// TestWalkWhileTheFlowChanges: a walk of the ended tasks while tasks end,
// are reopened and are added (a review round) between its pages shows no
// task twice, and every task ended all along exactly once; a walk of
// every task shows each once.
func TestWalkWhileTheFlowChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 50 {
		var tasks []*projection.Task
		for i := range 200 + rng.IntN(200) {
			st := drovertype.TaskPending
			if rng.IntN(2) == 0 {
				st = drovertype.TaskFailed
			}
			tasks = append(tasks, &projection.Task{ID: fmt.Sprintf("t%04d", i), State: st})
		}
		failedAllAlong := map[string]bool{}
		for _, tk := range tasks {
			if tk.State == drovertype.TaskFailed {
				failedAllAlong[tk.ID] = true
			}
		}
		read := func() []*projection.Task { return slices.Clone(tasks) }
		change := func(page int) {
			if page >= 10 {
				return // a walk ends once the flow stops growing
			}
			for range 20 {
				tk := tasks[rng.IntN(len(tasks))]
				if tk.State == drovertype.TaskFailed {
					tk.State = drovertype.TaskPending // an operator's retry
					delete(failedAllAlong, tk.ID)
				} else {
					tk.State = drovertype.TaskFailed
				}
			}
			tasks = append(tasks, &projection.Task{ID: fmt.Sprintf("r%04d", len(tasks)), State: drovertype.TaskFailed})
		}
		limit := 1 + rng.IntN(50)
		shown := walkLocal(t, "f", read, StatusRequest{Flow: "f", Limit: limit, States: []string{"failed"}}, change)
		seen := map[string]bool{}
		for _, id := range shown {
			if seen[id] {
				t.Fatalf("run %d (limit %d): %s shown twice", run, limit, id)
			}
			seen[id] = true
		}
		for id := range failedAllAlong {
			if !seen[id] && id[0] == 't' {
				t.Fatalf("run %d (limit %d): %s, failed all along, not shown", run, limit, id)
			}
		}
		all := walkLocal(t, "f", read, StatusRequest{Flow: "f", Limit: limit}, change)
		if !slices.Equal(all, idsOf(tasks)) {
			t.Fatalf("run %d (limit %d): a walk of every task showed %d of %d, or out of order", run, limit, len(all), len(tasks))
		}
	}
}

func positions(ids []string, tasks []*projection.Task) []int {
	var out []int
	for _, id := range ids {
		out = append(out, slices.IndexFunc(tasks, func(t *projection.Task) bool { return t.ID == id }))
	}
	return out
}

// pagedFlow submits a flow of 10 independent tasks (scheduled) and 15
// that depend on the first (pending), and waits for it to be scheduled.
func pagedFlow(t *testing.T, h *harness, name string) string {
	t.Helper()
	spec := &flow.Spec{Name: name, Repo: "/srv/repo.git", Base: "main", Runtime: "demo"}
	for i := range 25 {
		task := flow.Task{ID: fmt.Sprintf("t%02d", i), Prompt: "p"}
		if i >= 10 {
			task.DependsOn = []string{"t00"}
		}
		spec.Tasks = append(spec.Tasks, task)
	}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor("the flow's first tasks to be scheduled", func(st *projection.State) bool {
		return st.Attempts[drovertype.AttemptID(id, "t09", 1)] != nil
	})
	return id
}

// TestStatusPagesOverTheAPI walks a flow's tasks through the API in pages
// of every size, filtered by state and by id, and reads a page's summary.
func TestStatusPagesOverTheAPI(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	id := pagedFlow(t, h, "paged")
	cl := &Client{NC: h.nc}
	ctx := context.Background()

	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("t%02d", i))
	}
	for _, tc := range []struct {
		req  StatusRequest
		want []string
	}{
		{StatusRequest{Limit: 4}, want},
		{StatusRequest{Limit: 1}, want},
		{StatusRequest{Limit: 25}, want},
		{StatusRequest{Limit: 1000}, want},
		{StatusRequest{Limit: 3, States: []string{"scheduled"}}, want[:10]},
		{StatusRequest{Limit: 7, States: []string{"pending", "failed"}}, want[10:]},
		{StatusRequest{Limit: 2, States: []string{"succeeded"}}, nil},
		{StatusRequest{Limit: 2, Tasks: []string{"t24", "t03", "nosuch"}}, []string{"t03", "t24"}},
		{StatusRequest{Limit: 5, After: id + "/t19"}, want[20:]},
	} {
		tc.req.Flow = id
		var got []string
		pages := 0
		err := cl.WalkTasks(ctx, tc.req, func(st *StatusResponse) error {
			d, p := st.Detail, st.Detail.Page
			if p.Tasks != 25 || p.Counts[drovertype.TaskScheduled] != 10 || p.Counts[drovertype.TaskPending] != 15 {
				t.Errorf("%+v: the summary says %d tasks, %v", tc.req, p.Tasks, p.Counts)
			}
			if p.Before != len(got) && tc.req.After == "" {
				t.Errorf("%+v: page %d says %d before it, %d were shown", tc.req, pages, p.Before, len(got))
			}
			if len(d.Flow.Order) != 0 || len(d.Flow.Spec.Tasks) != len(d.Tasks) {
				t.Errorf("%+v: the page carries the flow's order (%d) or other tasks' specs (%d for %d rows)",
					tc.req, len(d.Flow.Order), len(d.Flow.Spec.Tasks), len(d.Tasks))
			}
			for _, task := range d.Tasks {
				got = append(got, task.ID)
				if task.State == drovertype.TaskScheduled && !slices.ContainsFunc(d.Attempts, func(a *projection.Attempt) bool { return a.ID == task.Attempt }) {
					t.Errorf("%+v: task %s's attempt is not on its page", tc.req, task.ID)
				}
			}
			pages++
			return nil
		})
		if err != nil {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: walked %v, want %v", tc.req, got, tc.want)
		}
	}

	// What the Client refuses before sending, in the controller's words.
	for req, msg := range map[*StatusRequest]string{
		{Flow: id}:                                   "status request: limit: required for a page: 1 to 1000",
		{Flow: id, Limit: 1001}:                      "status request: limit: 1001; a page holds 1 to 1000 tasks (walk the rest with after)",
		{Flow: id, Limit: 5, After: "x/t01"}:         "status request: after: \"x/t01\" is a cursor of flow x, not of " + id,
		{Flow: id, Limit: 5, States: []string{"ok"}}: `status request: states: "ok" is not a task state (pending, scheduled, running, retrying, succeeded, failed, blocked, cancelled or waiting)`,
	} {
		_, err := cl.StatusPage(ctx, *req)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != CodeBadRequest || apiErr.Message != msg {
			t.Errorf("%+v: %v, want %q", *req, err, msg)
		}
	}
	// A cursor of a task the flow does not have: the controller's check.
	_, err := cl.StatusPage(ctx, StatusRequest{Flow: id, Limit: 5, After: id + "/t99"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != CodeBadRequest || apiErr.Message != "status request: after: flow "+id+" has no task t99" {
		t.Errorf("a cursor of no task: %v", err)
	}
	// An old client's request (no limit) gets every task, as before.
	st, err := cl.Status(ctx, id)
	if err != nil || len(st.Detail.Tasks) != 25 || st.Detail.Page != nil || len(st.Detail.Flow.Order) != 25 {
		t.Fatalf("the old form: %v, %+v", err, st)
	}
}

// TestStatusPageOfAnOldController: a controller older than pages refuses
// a page's members; the Client asks it for the whole flow instead and cuts
// the same pages from it.
func TestStatusPageOfAnOldController(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	id := pagedFlow(t, h, "old")
	// The old controller: the status request's decoder before pages, and
	// the same projection.
	old, err := micro.AddService(h.nc, micro.Config{Name: "old-controller", Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	var asked atomic.Int32
	err = old.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) {
		asked.Add(1)
		m, err := members("status", r.Data(), maxRequestSize, "flow")
		if err != nil {
			h.ctrl.refuse(r, "status", err)
			return
		}
		flowID, _ := stringMember("status", m, "flow")
		resp, _, _ := h.ctrl.readStatus(StatusRequest{Flow: flowID})
		resp.Controller = "old-ctl"
		h.ctrl.respondJSON(context.Background(), r, resp)
	}), micro.WithEndpointSubject(ControllerSubject("old-ctl", SubjectStatus)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, req := range []StatusRequest{
		{Flow: id, Limit: 4},
		{Flow: id, Limit: 3, States: []string{"pending"}},
		{Flow: id, Limit: 2, Tasks: []string{"t05", "t17"}},
	} {
		walk := func(cl *Client) (pages []*StatusResponse) {
			t.Helper()
			err := cl.WalkTasks(ctx, req, func(st *StatusResponse) error {
				pages = append(pages, st)
				return nil
			})
			if err != nil {
				t.Fatalf("%+v: %v", req, err)
			}
			return pages
		}
		// The flow is running: the controller may fold its decisions (a
		// task_waiting, say) between the two walks, which then read two
		// projections. Walk again until nothing was folded meanwhile.
		var oldPages, newPages []*StatusResponse
		for try := 0; ; try++ {
			folded := h.ctrl.store.Applied()
			asked.Store(0)
			oldPages, newPages = walk(&Client{NC: h.nc, Controller: "old-ctl"}), walk(&Client{NC: h.nc})
			if h.ctrl.store.Applied() == folded || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if asked.Load() != 2 {
			t.Errorf("%+v: the old controller was asked %d times, want twice (refused, then the whole flow)", req, asked.Load())
		}
		if len(oldPages) != len(newPages) {
			t.Fatalf("%+v: %d pages from the old controller, %d from the new", req, len(oldPages), len(newPages))
		}
		for i := range oldPages {
			o, n := oldPages[i].Detail, newPages[i].Detail
			if !equalJSON(o.Page, n.Page) || !equalJSON(o.Tasks, n.Tasks) || !equalJSON(o.Attempts, n.Attempts) || !equalJSON(o.Flow, n.Flow) {
				t.Errorf("%+v: page %d differs:\nold %s\nnew %s", req, i, mustJSON(o), mustJSON(n))
			}
		}
	}
}

func equalJSON(a, b any) bool { return mustJSON(a) == mustJSON(b) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzStatusPage: whatever a status request holds, an accepted page
// request selects within its limit, from its flow, in the flow's order,
// and a refused one is a bad request.
func FuzzStatusPage(f *testing.F) {
	for _, s := range []string{
		`{"flow":"f","limit":3}`, `{"flow":"f","limit":2,"after":"f/t03","states":["failed","waiting"]}`,
		`{"flow":"f","limit":1,"tasks":["t01","t02"]}`, `{"flow":"f","limit":5,"after":"g/t01"}`, `{"flow":"f","limit":5,"after":"f/zz"}`,
	} {
		f.Add([]byte(s))
	}
	var tasks []*projection.Task
	states := TaskStates()
	for i := range 12 {
		tasks = append(tasks, &projection.Task{ID: fmt.Sprintf("t%02d", i), State: states[i%len(states)]})
	}
	why := func(t *projection.Task) (string, time.Time) {
		if t.ID[2]%3 == 0 {
			return "a cooldown", time.Time{}
		}
		return "", time.Time{}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeStatus(body)
		var re *requestError
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("refusal %v is not a bad request", err)
			}
			return
		}
		if !req.Paged() {
			return
		}
		sel, err := selectPage(req.Flow, tasks, why, req)
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("refusal %v is not a bad request", err)
			}
			return
		}
		if len(sel.rows) > req.Limit || req.Limit < 1 || req.Limit > MaxPageLimit {
			t.Fatalf("%d rows for a limit of %d", len(sel.rows), req.Limit)
		}
		if !slices.IsSorted(positions(idsOf(sel.rows), tasks)) {
			t.Fatalf("rows out of the flow's order")
		}
		if p := sel.page; p.Before+len(sel.rows) > p.Matching || (p.Next != "") != (p.After(len(sel.rows)) > 0) {
			t.Fatalf("page %+v with %d rows", p, len(sel.rows))
		}
	})
}

func idsOf(tasks []*projection.Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}
