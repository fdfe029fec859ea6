package gitlab

import (
	"crypto/subtle"
	"fmt"
	"net/http"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/drover-dev/drover/internal/forge"
)

// Hook verifies and reads GitLab's webhook deliveries.
type Hook struct{}

var _ forge.Hook = Hook{}

// Verify compares X-Gitlab-Token, the secret token GitLab sends as it was
// configured, with the secret in constant time.
func (Hook) Verify(h http.Header, _, secret []byte) error {
	tok := h.Get("X-Gitlab-Token")
	switch {
	case tok == "":
		return forge.ErrUnsigned
	case len(secret) == 0:
		return fmt.Errorf("%w: no secret to check it with", forge.ErrBadSignature)
	case subtle.ConstantTimeCompare([]byte(tok), secret) != 1:
		return forge.ErrBadSignature
	}
	return nil
}

// Decode reads what a delivery is about with client-go's ParseWebhook.
// Its id is the Idempotency-Key GitLab keeps across its retries of one
// delivery, else X-Gitlab-Event-UUID.
func (Hook) Decode(h http.Header, body []byte) (*forge.Delivery, error) {
	d := &forge.Delivery{ID: h.Get("Idempotency-Key"), Event: h.Get("X-Gitlab-Event")}
	if d.ID == "" {
		d.ID = h.Get("X-Gitlab-Event-UUID")
	}
	if d.ID == "" || d.Event == "" {
		return nil, fmt.Errorf("%w: no Idempotency-Key or X-Gitlab-Event-UUID, or no X-Gitlab-Event", forge.ErrBadDelivery)
	}
	switch gl.EventType(d.Event) {
	case gl.EventTypeMergeRequest, gl.EventTypeNote, gl.EventTypePipeline, gl.EventTypeJob:
	default:
		d.Ignored = true
		return d, nil
	}
	ev, err := gl.ParseWebhook(gl.EventType(d.Event), body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", forge.ErrBadDelivery, d.Event, err)
	}
	switch e := ev.(type) {
	case *gl.MergeEvent:
		d.Repo, d.Number = e.Project.PathWithNamespace, int(e.ObjectAttributes.IID)
		d.Head, d.SHA = e.ObjectAttributes.SourceBranch, e.ObjectAttributes.LastCommit.ID
	case *gl.MergeCommentEvent:
		d.Repo, d.Number = e.Project.PathWithNamespace, int(e.MergeRequest.IID)
		d.Head, d.SHA = e.MergeRequest.SourceBranch, e.MergeRequest.LastCommit.ID
	case *gl.PipelineEvent:
		d.Repo, d.Number = e.Project.PathWithNamespace, int(e.MergeRequest.IID)
		d.Head, d.SHA = e.ObjectAttributes.Ref, e.ObjectAttributes.SHA
	case *gl.JobEvent:
		if e.Repository != nil {
			d.Repo = e.Repository.PathWithNamespace
		}
		d.Head, d.SHA = e.Ref, e.SHA
	default:
		d.Ignored = true // a note on an issue or a commit
		return d, nil
	}
	if d.Repo == "" {
		return nil, fmt.Errorf("%w: %s names no project", forge.ErrBadDelivery, d.Event)
	}
	return d, nil
}
