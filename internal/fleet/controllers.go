package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
	kv, err := js.KeyValue(ctx, queue.ControllersBucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", queue.ControllersBucket, err)
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("fleet: encode registration: %w", err)
	}
	if _, err := kv.Put(ctx, c.ID, data); err != nil {
		return fmt.Errorf("fleet: register controller %s: %w", c.ID, err)
	}
	return nil
}

// DeregisterController removes a controller that is stopping.
func DeregisterController(ctx context.Context, js jetstream.JetStream, id string) error {
	kv, err := js.KeyValue(ctx, queue.ControllersBucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", queue.ControllersBucket, err)
	}
	if err := kv.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("fleet: deregister controller %s: %w", id, err)
	}
	return nil
}

// Controllers lists the registered controllers, sorted by id. Entries that
// do not decode are skipped, as Workers skips them.
func Controllers(ctx context.Context, js jetstream.JetStream) ([]*Controller, error) {
	kv, err := js.KeyValue(ctx, queue.ControllersBucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: open %s: %w", queue.ControllersBucket, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: list controllers: %w", err)
	}
	var out []*Controller
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // deleted or expired since listed
		}
		var c Controller
		if json.Unmarshal(e.Value(), &c) == nil && c.ID == key {
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
