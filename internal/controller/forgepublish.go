package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/forge"
)

// publishWork is a publish request the forge has not answered.
type publishWork struct {
	flow string
	req  event.PullRequestRequestedData
}

// publish carries out a request and records the answer; a forge that did
// not answer is asked again later, with backoff.
func (r *forgeRunner) publish(ctx context.Context, w publishWork) {
	d, err := r.publishOnce(ctx, w)
	if err != nil {
		wait := r.retryLater(w.flow)
		r.log.Warn("publishing the pull request failed; trying again", "flow", w.flow, "request", w.req.N, "in", wait, "err", err)
		return
	}
	ev, err := event.New(drovertype.EventID(event.PullRequestPublished, fmt.Sprintf("%s:%d", w.flow, w.req.N)),
		event.PullRequestPublished, r.now(), w.flow, "", "", 0, d)
	if err == nil {
		err = r.emit(ctx, ev)
	}
	if err != nil {
		r.log.Warn("record a published pull request", "flow", w.flow, "request", w.req.N, "err", err)
		r.retryLater(w.flow)
		return
	}
	if d.Error != nil {
		r.log.Error("publishing the pull request was refused", "flow", w.flow, "class", d.Error.Class, "err", d.Error.Message)
		return
	}
	r.log.Info("pull request published", "flow", w.flow, "number", d.Number, "url", d.URL, "created", d.Created)
}

// publishOnce looks the pull request up by its head branch, opens or
// updates it, and comments; a refusal is the answer (Error set), any
// other failure an error to try again after.
func (r *forgeRunner) publishOnce(ctx context.Context, w publishWork) (*event.PullRequestPublishedData, error) {
	req := w.req
	out := &event.PullRequestPublishedData{N: req.N}
	refused := func(err error) (*event.PullRequestPublishedData, error) {
		if !forge.Permanent(err) {
			return nil, err
		}
		out.Error = r.refusal(req, err)
		return out, nil
	}
	f, err := r.client(req.Forge)
	if err != nil {
		return refused(err)
	}
	base := req.Base
	if base == "" {
		if base, err = f.DefaultBranch(ctx, req.Repo); err != nil {
			return refused(err)
		}
	}
	pub := forge.Publication{Head: req.Head, Base: base, Title: req.Title, Body: req.Body, Draft: req.Draft,
		Labels: req.Labels, Reviewers: req.Reviewers, Assignees: req.Assignees}
	pr, err := f.FindPullRequest(ctx, req.Repo, req.Head, base)
	if err != nil {
		return refused(err)
	}
	switch {
	case pr == nil:
		created, err := f.CreatePullRequest(ctx, req.Repo, pub)
		if created == nil {
			return refused(err)
		}
		if err != nil { // opened, but a label, a reviewer or an assignee was refused
			r.log.Warn("pull request opened; its labels, reviewers or assignees were not all set", "flow", w.flow, "err", err)
		}
		pr, out.Created = created, true
	case pr.State == forge.Open:
		if pr, err = f.UpdatePullRequest(ctx, req.Repo, pr.Number, pub); err != nil {
			return refused(err)
		}
	}
	out.Number, out.URL, out.State, out.Head, out.Base, out.HeadSHA = pr.Number, pr.URL, string(pr.State), pr.Head, pr.Base, pr.HeadSHA
	if out.Head == "" {
		out.Head = req.Head
	}
	if req.Comment != "" && pr.State == forge.Open {
		marker := fmt.Sprintf("<!-- drover:%s:request-%d -->", w.flow, req.N)
		url, err := f.Comment(ctx, req.Repo, pr.Number, marker, req.Comment+"\n"+marker)
		switch {
		case err != nil && !forge.Permanent(err):
			return nil, err
		case err != nil:
			r.log.Warn("the pull request's comment was refused", "flow", w.flow, "number", pr.Number, "err", err)
		}
		out.Comment = url
	}
	return out, nil
}

// maxRefusal bounds the message of a refusal recorded.
const maxRefusal = 1000

// refusal is the error a publish ends with when the forge refused it.
func (r *forgeRunner) refusal(req event.PullRequestRequestedData, err error) *event.ErrorInfo {
	info := &event.ErrorInfo{Class: drovertype.ClassPublishRefused, Category: drovertype.CategoryInput}
	var fe *forge.Error
	if errors.As(err, &fe) {
		info.Status = fe.Status
	}
	msg := r.red.String(err.Error())
	switch {
	case errors.Is(err, forge.ErrAuth):
		info.Class = drovertype.ClassAuthFailed
		env := ""
		if fc, ok := r.cfg.Forges[req.Forge]; ok {
			env = " in $" + fc.TokenEnv
		}
		msg = fmt.Sprintf("forge %s refused the token%s: %s; the flow's own outcome stands, publish again with `controller publish` once the token is fixed",
			req.Forge, env, msg)
	case errors.Is(err, forge.ErrNotFound):
		info.Class = drovertype.ClassRepoNotFound
		msg = fmt.Sprintf("forge %s has no repository %s that the token may see: %s", req.Forge, req.Repo, msg)
	}
	info.Message = cutText(msg, maxRefusal)
	return info
}

// cutText bounds outside text to max bytes, cut at a character boundary.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
