package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/queue"

	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/drovertype"
)

// Operator API subjects.
const (
	SubjectCancel  = queue.APIPrefix + ".cancel"
	SubjectRetry   = queue.APIPrefix + ".retry"
	SubjectPause   = queue.APIPrefix + ".pause"
	SubjectResume  = queue.APIPrefix + ".resume"
	SubjectResolve = queue.APIPrefix + ".resolve"
)

// OperatorRequest names what an operator acts on: a flow id, FLOW/TASK, or
// an attempt id (FLOW_TASK_N).
type OperatorRequest struct {
	Target string `json:"target"`
	Reason string `json:"reason,omitempty"`
}

// OperatorResponse says what the request was recorded against.
type OperatorResponse struct {
	Flow    string `json:"flow"`
	Task    string `json:"task,omitempty"`
	Attempt string `json:"attempt,omitempty"`
	Event   string `json:"event"`
	Message string `json:"message"`
}

// Target is a parsed operator target.
type Target struct {
	Flow, Task, Attempt string
}

// ParseTarget reads FLOW, FLOW/TASK or FLOW_TASK_N (an attempt id, read by
// drovertype.ParseAttemptID). Every id is validated: they end up in
// subjects and keys.
func ParseTarget(s string) (Target, error) {
	var t Target
	switch {
	case strings.Contains(s, "/"):
		t.Flow, t.Task, _ = strings.Cut(s, "/")
	case strings.Contains(s, "_"):
		flowID, task, _, err := drovertype.ParseAttemptID(s)
		if err != nil {
			return t, fmt.Errorf("%w (an attempt id is FLOW_TASK_N)", err)
		}
		if task == "" {
			return t, fmt.Errorf("%.80q is a build of the flow's integration branch, not an attempt of a task", s)
		}
		return Target{Flow: flowID, Task: task, Attempt: s}, nil
	default:
		t.Flow = s
	}
	if err := drovertype.ValidID(t.Flow); err != nil {
		return t, fmt.Errorf("flow id %.80q: %v", t.Flow, err)
	}
	if t.Task != "" || strings.Contains(s, "/") {
		if err := drovertype.ValidID(t.Task); err != nil {
			return t, fmt.Errorf("task id %.80q: %v", t.Task, err)
		}
	}
	return t, nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// operate checks a request against the folded state and records its event.
// check returns the event to record, or an error message for the operator.
func (c *Controller) operate(ctx context.Context, r micro.Request, what string, check func(st *projection.State, t Target, reason string) (*event.Event, string, error)) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err != nil {
		c.refuse(r, what, err)
		return
	}
	req, t, err := decodeOperator(what, body)
	if err != nil {
		c.refuse(r, what, err)
		return
	}
	var ev *event.Event
	var msg string
	c.store.Read(func(st *projection.State) { ev, msg, err = check(st, t, req.Reason) })
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
	c.log.Info("operator request", "type", ev.Type, "flow", ev.Flow, "task", ev.Task, "attempt", ev.Attempt, "reason", req.Reason)
	c.respondJSON(ctx, r, OperatorResponse{Flow: ev.Flow, Task: ev.Task, Attempt: ev.Attempt, Event: string(ev.Type), Message: msg})
}

type notFound struct{ error }

func findFlow(st *projection.State, t Target) (*projection.Flow, error) {
	f := st.Flows[t.Flow]
	if f == nil {
		return nil, notFound{fmt.Errorf("no flow %s", t.Flow)}
	}
	return f, nil
}

func findTask(st *projection.State, t Target) (*projection.Flow, *projection.Task, error) {
	f, err := findFlow(st, t)
	if err != nil {
		return nil, nil, err
	}
	task := st.Task(f.ID, t.Task)
	if task == nil {
		return nil, nil, notFound{fmt.Errorf("flow %s has no task %s", f.ID, t.Task)}
	}
	return f, task, nil
}

func (c *Controller) handleCancel(ctx context.Context, r micro.Request) {
	c.operate(ctx, r, "cancel", func(st *projection.State, t Target, reason string) (*event.Event, string, error) {
		f, err := findFlow(st, t)
		if err != nil {
			return nil, "", err
		}
		if f.State.Terminal() {
			return nil, "", fmt.Errorf("flow %s has already ended (%s)", f.ID, f.State)
		}
		d := event.CancelRequestedData{Scope: event.CancelFlow, Reason: reason}
		msg := fmt.Sprintf("cancelling flow %s: running CLIs are stopped, no new attempt starts", f.ID)
		switch {
		case t.Attempt != "":
			a := st.Attempts[t.Attempt]
			if a == nil || a.Flow != f.ID {
				return nil, "", notFound{fmt.Errorf("no attempt %s", t.Attempt)}
			}
			task := st.Task(f.ID, a.Task)
			if a.State.Terminal() || task == nil || task.Attempt != a.ID {
				return nil, "", fmt.Errorf("attempt %s is not running (%s)", a.ID, a.State)
			}
			d.Scope, msg = event.CancelAttempt, fmt.Sprintf("cancelling attempt %s and its task %s", a.ID, a.Task)
		case t.Task != "":
			_, task, err := findTask(st, t)
			if err != nil {
				return nil, "", err
			}
			if task.State.Terminal() {
				return nil, "", fmt.Errorf("task %s has already ended (%s)", t.Task, task.State)
			}
			d.Scope, msg = event.CancelTask, fmt.Sprintf("cancelling task %s", t.Task)
		}
		ev, err := event.New(drovertype.EventID(event.CancelRequested, randomSuffix()), event.CancelRequested, c.now(), f.ID, t.Task, t.Attempt, 0, d)
		return ev, msg, err
	})
}

func (c *Controller) handleRetry(ctx context.Context, r micro.Request) {
	// A flow as the target retries each of its failed or cancelled tasks.
	if req, t, err := decodeOperator("retry", r.Data()); err == nil && t.Task == "" && t.Attempt == "" {
		c.retryFlow(ctx, r, t, req.Reason)
		return
	}
	c.operate(ctx, r, "retry", func(st *projection.State, t Target, reason string) (*event.Event, string, error) {
		if t.Task == "" {
			return nil, "", fmt.Errorf("retry takes FLOW or FLOW/TASK, got an attempt: %s", t.Attempt)
		}
		f, task, err := findTask(st, t)
		if err != nil {
			return nil, "", err
		}
		if f.Cancel != nil {
			return nil, "", fmt.Errorf("flow %s was cancelled; submit it again", f.ID)
		}
		msg := fmt.Sprintf("retrying task %s", task.ID)
		if task.State == drovertype.TaskBlocked {
			// A blocked task waits on a failure upstream: retry that one.
			root := st.Task(f.ID, task.BlockedBy)
			if root == nil {
				return nil, "", fmt.Errorf("task %s is blocked by unknown task %s", task.ID, task.BlockedBy)
			}
			msg = fmt.Sprintf("task %s is blocked by %s: retrying %s", task.ID, root.ID, root.ID)
			task = root
		}
		if task.State != drovertype.TaskFailed && task.State != drovertype.TaskCancelled {
			return nil, "", fmt.Errorf("task %s is %s; only failed, cancelled or blocked tasks can be retried", task.ID, task.State)
		}
		if a := st.Attempts[task.Attempt]; a != nil && !a.State.Terminal() {
			return nil, "", fmt.Errorf("task %s: attempt %s is still stopping; try again in a few seconds", task.ID, a.ID)
		}
		if why, _ := budgetReached(c.cfg, f, task); why != "" {
			return nil, "", fmt.Errorf("task %s: %s; raise it first (controller budget)", task.ID, why)
		}
		ev, err := event.New(drovertype.EventID(event.TaskRetryRequested, randomSuffix()), event.TaskRetryRequested, c.now(), f.ID, task.ID, "", 0,
			event.OperatorData{Reason: reason})
		return ev, msg, err
	})
}

// retryFlow reopens every failed or cancelled task of a flow at once (the
// tasks they blocked follow): what `controller retry FLOW` does after the
// flow's budget was raised, say. Each is its own task_retry_requested.
func (c *Controller) retryFlow(ctx context.Context, r micro.Request, t Target, reason string) {
	var evs []*event.Event
	var err error
	c.store.Read(func(st *projection.State) { evs, err = c.flowRetries(st, t, reason) })
	if err != nil {
		code := CodeBadRequest
		if nf, ok := err.(notFound); ok {
			code, err = CodeNotFound, nf
		}
		_ = r.Error(code, err.Error(), nil)
		return
	}
	tasks := make([]string, len(evs))
	for i, ev := range evs {
		if err := c.record(ctx, ev); err != nil {
			_ = r.Error(CodeInternal, fmt.Sprintf("retried %s, then: %v", strings.Join(tasks[:i], ", "), err), nil)
			return
		}
		tasks[i] = ev.Task
	}
	c.log.Info("operator request", "type", event.TaskRetryRequested, "flow", t.Flow, "tasks", len(evs), "reason", reason)
	c.respondJSON(ctx, r, OperatorResponse{Flow: t.Flow, Event: string(event.TaskRetryRequested),
		Message: fmt.Sprintf("retrying %d tasks of flow %s: %s", len(evs), t.Flow, strings.Join(tasks, ", "))})
}

// flowRetries are the retry requests of a flow's failed and cancelled tasks.
func (c *Controller) flowRetries(st *projection.State, t Target, reason string) ([]*event.Event, error) {
	f, err := findFlow(st, t)
	if err != nil {
		return nil, err
	}
	if f.Cancel != nil {
		return nil, fmt.Errorf("flow %s was cancelled; submit it again", f.ID)
	}
	var evs []*event.Event
	for _, task := range st.FlowTasks(f) {
		if task.State != drovertype.TaskFailed && task.State != drovertype.TaskCancelled {
			continue
		}
		if a := st.Attempts[task.Attempt]; a != nil && !a.State.Terminal() {
			return nil, fmt.Errorf("task %s: attempt %s is still stopping; try again in a few seconds", task.ID, a.ID)
		}
		if why, _ := budgetReached(c.cfg, f, task); why != "" {
			return nil, fmt.Errorf("task %s: %s; raise it first (controller budget)", task.ID, why)
		}
		ev, err := event.New(drovertype.EventID(event.TaskRetryRequested, randomSuffix()), event.TaskRetryRequested, c.now(), f.ID, task.ID, "", 0,
			event.OperatorData{Reason: reason})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("flow %s has no failed or cancelled task to retry", f.ID)
	}
	return evs, nil
}

func (c *Controller) handlePause(resume bool) func(context.Context, micro.Request) {
	what := "pause"
	if resume {
		what = "resume"
	}
	return func(ctx context.Context, r micro.Request) {
		c.operate(ctx, r, what, func(st *projection.State, t Target, reason string) (*event.Event, string, error) {
			if t.Task != "" || t.Attempt != "" {
				return nil, "", fmt.Errorf("pause and resume take a flow id")
			}
			f, err := findFlow(st, t)
			if err != nil {
				return nil, "", err
			}
			if f.State.Terminal() {
				return nil, "", fmt.Errorf("flow %s has already ended (%s)", f.ID, f.State)
			}
			typ, msg := event.FlowPaused, fmt.Sprintf("flow %s paused: running attempts go on, no new one starts", f.ID)
			if resume {
				typ, msg = event.FlowResumed, fmt.Sprintf("flow %s resumed", f.ID)
			}
			ev, err := event.New(drovertype.EventID(typ, randomSuffix()), typ, c.now(), f.ID, "", "", 0, event.OperatorData{Reason: reason})
			return ev, msg, err
		})
	}
}

// Cancel, Retry, Pause and Resume call the operator API.
func (cl *Client) Cancel(ctx context.Context, target, reason string) (*OperatorResponse, error) {
	return cl.operator(ctx, SubjectCancel, target, reason)
}

// Retry starts a new attempt of a failed, cancelled or blocked task.
func (cl *Client) Retry(ctx context.Context, target, reason string) (*OperatorResponse, error) {
	return cl.operator(ctx, SubjectRetry, target, reason)
}

// Pause stops scheduling new attempts of a flow.
func (cl *Client) Pause(ctx context.Context, target, reason string) (*OperatorResponse, error) {
	return cl.operator(ctx, SubjectPause, target, reason)
}

// Resume restarts scheduling of a paused flow.
func (cl *Client) Resume(ctx context.Context, target, reason string) (*OperatorResponse, error) {
	return cl.operator(ctx, SubjectResume, target, reason)
}

func (cl *Client) operator(ctx context.Context, subject, target, reason string) (*OperatorResponse, error) {
	req := OperatorRequest{Target: target, Reason: reason}
	if _, err := req.check(strings.TrimPrefix(subject, queue.APIPrefix+".")); err != nil {
		return nil, refusedHere(err)
	}
	var resp OperatorResponse
	err := cl.call(ctx, subject, req, &resp)
	return &resp, err
}
