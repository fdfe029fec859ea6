package gitea

import (
	"encoding/json"
	"fmt"
	"net/http"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/drover-dev/drover/internal/forge"
)

// Hook verifies and reads Gitea's and Forgejo's webhook deliveries.
type Hook struct{}

var _ forge.Hook = Hook{}

// Verify checks X-Gitea-Signature (Forgejo: X-Forgejo-Signature), the hex
// HMAC-SHA256 of the body with the webhook's secret, with the SDK's
// VerifyWebhookSignature (hmac.Equal: constant time).
func (Hook) Verify(h http.Header, body, secret []byte) error {
	sig := h.Get("X-Gitea-Signature")
	if sig == "" {
		sig = h.Get("X-Forgejo-Signature")
	}
	switch {
	case sig == "":
		return forge.ErrUnsigned
	case len(secret) == 0:
		return fmt.Errorf("%w: no secret to check it with", forge.ErrBadSignature)
	}
	ok, err := sdk.VerifyWebhookSignature(string(secret), sig, body)
	if err != nil {
		return fmt.Errorf("%w: %v", forge.ErrBadSignature, err)
	}
	if !ok {
		return forge.ErrBadSignature
	}
	return nil
}

// payload is the part of Gitea's webhook payloads Drover reads; the SDK
// has no types for them. A pull request event has the pull request and
// its number, a status event the commit.
type payload struct {
	Number      int64 `json:"number"`
	PullRequest *struct {
		Number int64 `json:"number"`
		Head   *struct {
			Ref string `json:"ref"`
			Sha string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	SHA        string `json:"sha"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// Decode reads what a delivery is about.
func (Hook) Decode(h http.Header, body []byte) (*forge.Delivery, error) {
	d := &forge.Delivery{ID: h.Get("X-Gitea-Delivery"), Event: h.Get("X-Gitea-Event")}
	if d.ID == "" {
		d.ID = h.Get("X-Forgejo-Delivery")
	}
	if d.Event == "" {
		d.Event = h.Get("X-Forgejo-Event")
	}
	if d.ID == "" || d.Event == "" {
		return nil, fmt.Errorf("%w: no X-Gitea-Delivery or X-Gitea-Event", forge.ErrBadDelivery)
	}
	switch d.Event {
	case "pull_request", "pull_request_review_approved", "pull_request_review_rejected", "pull_request_review_comment",
		"pull_request_sync", "status":
	default:
		d.Ignored = true
		return d, nil
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", forge.ErrBadDelivery, d.Event, err)
	}
	if p.Repository == nil || p.Repository.FullName == "" {
		return nil, fmt.Errorf("%w: %s names no repository", forge.ErrBadDelivery, d.Event)
	}
	d.Repo, d.Number, d.SHA = p.Repository.FullName, int(p.Number), p.SHA
	if pr := p.PullRequest; pr != nil {
		if d.Number == 0 {
			d.Number = int(pr.Number)
		}
		if pr.Head != nil {
			d.Head, d.SHA = pr.Head.Ref, pr.Head.Sha
		}
	}
	return d, nil
}
