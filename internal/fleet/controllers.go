package fleet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
)

// ControllerTTL is how long a controller's registration lives without
// renewal; controllers renew every few seconds.
const ControllerTTL = queue.ControllersTTL

// Controller roles, as a controller registers itself.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
)

// Controller is what a controller tells the others (and `controller
// controllers`) about itself.
type Controller struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	// Role is what the controller believes it is: RoleLeader while it
	// leads a term, RoleStandby otherwise. The lease's holder is the
	// truth; a leader that was paused says leader until it renews this.
	Role string `json:"role"`
	// Epoch is the latest leader epoch its fold has seen: the epoch of
	// its own term while it leads.
	Epoch uint64 `json:"epoch"`
	// Applied is the stream sequence its projection has folded; Lag how
	// many events of the stream it had not folded yet, when it wrote this.
	Applied uint64 `json:"applied_seq"`
	Lag     uint64 `json:"lag"`
	// LeaseTTL is its configured lease TTL.
	LeaseTTL time.Duration `json:"lease_ttl"`
	Started  time.Time     `json:"started"`
	Seen     time.Time     `json:"seen"`
}

// RegisterController writes (or renews) a controller's registration.
func RegisterController(ctx context.Context, js jetstream.JetStream, c *Controller) error {
	return put(ctx, js, queue.ControllersBucket, c.ID, "controller "+c.ID, c)
}

// DeregisterController removes a controller that is stopping.
func DeregisterController(ctx context.Context, js jetstream.JetStream, id string) error {
	return remove(ctx, js, queue.ControllersBucket, id, "controller "+id)
}

// Controllers lists the registered controllers, sorted by id. Entries that
// do not decode, or under another controller's key, are skipped.
func Controllers(ctx context.Context, js jetstream.JetStream) ([]*Controller, error) {
	return list(ctx, js, queue.ControllersBucket, func(key string, raw []byte) *Controller {
		var c Controller
		if json.Unmarshal(raw, &c) != nil || c.ID != key {
			return nil
		}
		return &c
	})
}
