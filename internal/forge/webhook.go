package forge

import (
	"errors"
	"net/http"
)

// MaxWebhookBody bounds a webhook delivery's body; a forge's payloads for
// the events Drover follows are a few tens of KiB (GitHub's limit is
// 25 MiB, for pushes of many commits, which Drover does not follow).
const MaxWebhookBody = 1 << 20

// Webhook refusals (errors.Is).
var (
	// ErrUnsigned: the delivery carries no signature (or token) at all.
	ErrUnsigned = errors.New("forge: webhook delivery is not signed")
	// ErrBadSignature: its signature does not match the secret.
	ErrBadSignature = errors.New("forge: webhook signature does not match")
	// ErrBadDelivery: it is signed but cannot be read: no delivery id, an
	// event type or payload that does not decode.
	ErrBadDelivery = errors.New("forge: webhook delivery cannot be read")
)

// Delivery is what a verified webhook delivery is about. Drover takes a
// delivery as a signal to look at the pull request again, never as the
// truth about it: what it decides on comes from the forge's API.
type Delivery struct {
	// ID is the forge's id of this delivery (X-GitHub-Delivery,
	// X-Gitlab-Event-UUID, X-Gitea-Delivery): a second delivery with the
	// same id is a replay.
	ID string
	// Event is the forge's event type (pull_request_review, check_run,
	// Merge Request Hook, ...); Ignored says Drover follows nothing of it
	// (a ping, a push).
	Event   string
	Ignored bool
	// Repo is the repository the event is about (owner/name; GitLab's
	// path with its namespace).
	Repo string
	// Number is the pull request's number when the event names one; SHA
	// and Head its commit and branch when it names those (a check run
	// names only its commit).
	Number int
	SHA    string
	Head   string
}

// Hook verifies and reads a forge's webhook deliveries.
type Hook interface {
	// Verify checks the delivery's signature against secret: ErrUnsigned
	// without one, ErrBadSignature when it does not match. It must be
	// called, and pass, before Decode.
	Verify(h http.Header, body, secret []byte) error
	// Decode reads what a verified delivery is about; an error wraps
	// ErrBadDelivery.
	Decode(h http.Header, body []byte) (*Delivery, error)
}
