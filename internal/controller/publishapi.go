package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/queue"
)

// Operator API subjects of publishing (docs/forges.md).
const (
	SubjectPublish = queue.APIPrefix + ".publish"
	SubjectIterate = queue.APIPrefix + ".iterate"
)

// PublishRequest asks for a flow's pull request to be opened or updated
// now (`controller publish`); DryRun only says what it would say.
type PublishRequest struct {
	Target string `json:"target"`
	Reason string `json:"reason,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// PublishResponse is what was recorded, or with DryRun what would be: the
// pull request's title, body and comment.
type PublishResponse struct {
	OperatorResponse
	Title   string `json:"title"`
	Body    string `json:"body"`
	Comment string `json:"comment,omitempty"`
}

func (r PublishRequest) check() (Target, error) {
	t, err := OperatorRequest{Target: r.Target, Reason: r.Reason}.check("publish")
	if err == nil && (t.Task != "" || t.Attempt != "") {
		err = badRequest("publish request: target: takes a flow id")
	}
	return t, err
}

func decodePublish(body []byte) (PublishRequest, Target, error) {
	const what = "publish"
	var r PublishRequest
	m, err := members(what, body, maxRequestSize, "target", "reason", "dry_run")
	if err == nil {
		r.Target, err = stringMember(what, m, "target")
	}
	if err == nil {
		r.Reason, err = stringMember(what, m, "reason")
	}
	if err == nil {
		r.DryRun, err = boolMember(what, m, "dry_run")
	}
	if err != nil {
		return r, Target{}, err
	}
	t, err := r.check()
	return r, t, err
}

// handlePublish records pull_request_requested for an ended flow with a
// publish section, or with dry_run answers what it would ask for.
func (c *Controller) handlePublish(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err != nil {
		c.refuse(r, "publish", err)
		return
	}
	req, t, err := decodePublish(body)
	if err != nil {
		c.refuse(r, "publish", err)
		return
	}
	var resp PublishResponse
	var ev *event.Event
	c.store.Read(func(st *projection.State) { ev, resp, err = c.publishEvent(st, t, req) })
	if err != nil {
		code := CodeBadRequest
		if nf, ok := err.(notFound); ok {
			code, err = CodeNotFound, nf
		}
		_ = r.Error(code, err.Error(), nil)
		return
	}
	if !req.DryRun {
		if err := c.record(ctx, ev); err != nil {
			_ = r.Error(CodeInternal, err.Error(), nil)
			return
		}
		c.forges.wake()
		c.log.Info("operator request", "type", ev.Type, "flow", ev.Flow, "reason", req.Reason)
	}
	c.respondJSON(ctx, r, resp)
}

// publishEvent is the request `controller publish` records.
func (c *Controller) publishEvent(st *projection.State, t Target, req PublishRequest) (*event.Event, PublishResponse, error) {
	var resp PublishResponse
	f, err := findFlow(st, t)
	if err != nil {
		return nil, resp, err
	}
	switch {
	case f.Publish == nil || f.Publish.PullRequest == nil:
		return nil, resp, fmt.Errorf("flow %s has no publish section: give it (or its project) publish: {pull_request: {...}} (docs/forges.md)", f.ID)
	case !f.State.Terminal():
		return nil, resp, fmt.Errorf("flow %s is %s: it is published when it ends", f.ID, f.State)
	case f.PR != nil && f.PR.Pending != nil:
		return nil, resp, fmt.Errorf("flow %s: request %d waits for the forge's answer; try again once it is published", f.ID, f.PR.Pending.N)
	}
	d, ok := prRequest(c.cfg, st, f)
	if !ok {
		return nil, resp, fmt.Errorf("flow %s has no integration branch to publish (none of its tasks succeeded, or its integration failed)", f.ID)
	}
	d.Reason = req.Reason
	resp.Title, resp.Body, resp.Comment, resp.Flow = d.Title, d.Body, d.Comment, f.ID
	resp.Event = string(event.PullRequestRequested)
	what := "opening"
	if f.PR != nil && f.PR.Number > 0 {
		what = fmt.Sprintf("updating #%d of", f.PR.Number)
	}
	resp.Message = fmt.Sprintf("%s the pull request of flow %s on %s (%s → %s)", what, f.ID, d.Forge, d.Head, orDefault(d.Base, "the default branch"))
	if req.DryRun {
		resp.Message = "dry run: " + resp.Message
		return nil, resp, nil
	}
	ev, err := event.New(drovertype.EventID(event.PullRequestRequested, f.ID+":op-"+randomSuffix()), event.PullRequestRequested,
		c.now(), f.ID, "", "", 0, d)
	return ev, resp, err
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// handleIterate records an operator's feedback on a flow's pull request,
// which starts a review round at the next decision (`controller iterate`).
func (c *Controller) handleIterate(ctx context.Context, r micro.Request) {
	c.operate(ctx, r, "iterate", func(st *projection.State, t Target, reason string) (*event.Event, string, error) {
		if t.Task != "" || t.Attempt != "" {
			return nil, "", fmt.Errorf("iterate takes a flow id")
		}
		f, err := findFlow(st, t)
		if err != nil {
			return nil, "", err
		}
		pr := f.PR
		switch {
		case pr == nil || pr.Number == 0:
			return nil, "", fmt.Errorf("flow %s has no published pull request (controller publish %s)", f.ID, f.ID)
		case pr.State != string(forge.Open):
			return nil, "", fmt.Errorf("flow %s's pull request #%d is %s", f.ID, pr.Number, pr.State)
		case f.Cancel != nil:
			return nil, "", fmt.Errorf("flow %s was cancelled", f.ID)
		}
		if why := reached(c.cfg, "the flow's", f.Budget, f.Spend); why != "" {
			return nil, "", fmt.Errorf("flow %s: %s; raise it first (controller budget)", f.ID, why)
		}
		key := "operator-" + randomSuffix()
		ev, err := event.New(drovertype.EventID(event.PullRequestFeedback, f.ID+":"+key), event.PullRequestFeedback, c.now(),
			f.ID, "", "", 0, event.PullRequestFeedbackData{Kind: event.FeedbackOperator, Key: key, HeadSHA: pr.HeadSHA, Message: reason})
		msg := fmt.Sprintf("round %d of pull request #%d starts with what waits on it", len(pr.Rounds)+1, pr.Number)
		if !f.State.Terminal() {
			msg = fmt.Sprintf("flow %s is running; a round of pull request #%d starts once it ends", f.ID, pr.Number)
		}
		return ev, msg, err
	})
}

// Publish asks for a flow's pull request to be opened or updated, or with
// dryRun for what it would say.
func (cl *Client) Publish(ctx context.Context, req PublishRequest) (*PublishResponse, error) {
	body, err := json.Marshal(req)
	if err == nil {
		_, _, err = decodePublish(body)
	}
	if err != nil {
		return nil, refusedHere(err)
	}
	var resp PublishResponse
	err = cl.call(ctx, SubjectPublish, req, &resp)
	return &resp, err
}

// Iterate starts a review round of a flow's pull request.
func (cl *Client) Iterate(ctx context.Context, target, reason string) (*OperatorResponse, error) {
	return cl.operator(ctx, SubjectIterate, target, reason)
}
