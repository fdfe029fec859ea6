package github

import (
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/drover-dev/drover/internal/forge"
)

// Hook verifies and reads GitHub's webhook deliveries.
type Hook struct{}

var _ forge.Hook = Hook{}

// Verify checks X-Hub-Signature-256, GitHub's HMAC-SHA256 of the body
// with the webhook's secret ("sha256=" and the hex digest), with
// go-github's ValidateSignature (a constant-time compare). The SHA-1
// X-Hub-Signature alone is not accepted.
func (Hook) Verify(h http.Header, body, secret []byte) error {
	sig := h.Get("X-Hub-Signature-256")
	switch {
	case sig == "":
		return forge.ErrUnsigned
	case !strings.HasPrefix(sig, "sha256="):
		return fmt.Errorf("%w: X-Hub-Signature-256 is not sha256=HEX", forge.ErrBadSignature)
	case len(secret) == 0:
		return fmt.Errorf("%w: no secret to check it with", forge.ErrBadSignature)
	}
	if err := gh.ValidateSignature(sig, body, secret); err != nil {
		return fmt.Errorf("%w: %v", forge.ErrBadSignature, err)
	}
	return nil
}

// Decode reads what a delivery is about, with go-github's ParseWebHook.
func (Hook) Decode(h http.Header, body []byte) (*forge.Delivery, error) {
	d := &forge.Delivery{ID: h.Get("X-GitHub-Delivery"), Event: h.Get("X-GitHub-Event")}
	if d.ID == "" || d.Event == "" {
		return nil, fmt.Errorf("%w: no X-GitHub-Delivery or X-GitHub-Event", forge.ErrBadDelivery)
	}
	switch d.Event {
	case "pull_request_review", "pull_request_review_comment", "pull_request", "check_run", "check_suite", "status":
	default:
		d.Ignored = true // a ping, a push: nothing Drover follows
		return d, nil
	}
	ev, err := gh.ParseWebHook(d.Event, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", forge.ErrBadDelivery, d.Event, err)
	}
	var repo *gh.Repository
	switch e := ev.(type) {
	case *gh.PullRequestReviewEvent:
		repo = e.GetRepo()
		d.Number, d.Head, d.SHA = e.GetPullRequest().GetNumber(), e.GetPullRequest().GetHead().GetRef(), e.GetPullRequest().GetHead().GetSHA()
	case *gh.PullRequestReviewCommentEvent:
		repo = e.GetRepo()
		d.Number, d.Head, d.SHA = e.GetPullRequest().GetNumber(), e.GetPullRequest().GetHead().GetRef(), e.GetPullRequest().GetHead().GetSHA()
	case *gh.PullRequestEvent:
		repo = e.GetRepo()
		d.Number, d.Head, d.SHA = e.GetPullRequest().GetNumber(), e.GetPullRequest().GetHead().GetRef(), e.GetPullRequest().GetHead().GetSHA()
	case *gh.CheckRunEvent:
		repo = e.GetRepo()
		d.SHA, d.Head = e.GetCheckRun().GetHeadSHA(), e.GetCheckRun().GetCheckSuite().GetHeadBranch()
		if run := e.GetCheckRun(); run != nil && len(run.PullRequests) > 0 { // a delivery may hold no check_run
			d.Number = run.PullRequests[0].GetNumber()
		}
	case *gh.CheckSuiteEvent:
		repo = e.GetRepo()
		d.SHA, d.Head = e.GetCheckSuite().GetHeadSHA(), e.GetCheckSuite().GetHeadBranch()
		if suite := e.GetCheckSuite(); suite != nil && len(suite.PullRequests) > 0 {
			d.Number = suite.PullRequests[0].GetNumber()
		}
	case *gh.StatusEvent:
		repo = e.GetRepo()
		d.SHA = e.GetSHA()
	}
	d.Repo = repo.GetFullName()
	if d.Repo == "" {
		return nil, fmt.Errorf("%w: %s names no repository", forge.ErrBadDelivery, d.Event)
	}
	return d, nil
}
