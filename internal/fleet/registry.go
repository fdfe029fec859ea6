package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// RegistrationTTL is how long a worker's registration lives without renewal;
// workers renew every RegistrationTTL/4.
const RegistrationTTL = queue.WorkersTTL

// Registration is what a worker tells the fleet about itself.
type Registration struct {
	ID       string          `json:"id"`
	Host     string          `json:"host"`
	Pool     string          `json:"pool"`
	Slots    int             `json:"slots"`
	Busy     int             `json:"busy"`
	Started  time.Time       `json:"started"`
	Seen     time.Time       `json:"seen"`
	Runtimes []RuntimeHealth `json:"runtimes"`
	// NotClaiming says why the worker claims nothing now (too little free
	// disk, draining, no sandbox); empty while it claims.
	NotClaiming string `json:"not_claiming,omitempty"`
	// Sandbox is how the worker confines its attempts: "landlock ABI 7",
	// "off: …" or "unavailable: …" (then it claims nothing).
	Sandbox string `json:"sandbox,omitempty"`
	// RenewMS is how often the worker renews its registration
	// (worker.health_interval), in milliseconds; 0 from workers older
	// than it, which a View then ages out by RegistrationTTL alone.
	RenewMS int64 `json:"renew_ms,omitempty"`
	// Raw is the registration as Workers read it, with the fields of
	// newer workers this build does not know (the console shows them).
	Raw json.RawMessage `json:"-"`
}

// RuntimeHealth is one runtime's fingerprint on one worker.
type RuntimeHealth struct {
	Name         string          `json:"name"`
	Adapter      string          `json:"adapter"`
	Binary       string          `json:"binary,omitempty"`
	Version      string          `json:"version,omitempty"`
	Healthy      bool            `json:"healthy"`
	Error        string          `json:"error,omitempty"`
	Checked      time.Time       `json:"checked"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	// Provider and Model name a native runtime's model API (anthropic,
	// openai-responses, openai-chat) and its configured model.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Sandbox is how the runtime's attempts are confined on the worker,
	// as Registration.Sandbox.
	Sandbox string `json:"sandbox,omitempty"`
}

// Register writes (or renews) a worker's registration.
func Register(ctx context.Context, js jetstream.JetStream, r *Registration) error {
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", queue.WorkersBucket, err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("fleet: encode registration: %w", err)
	}
	if _, err := kv.Put(ctx, r.ID, data); err != nil {
		return fmt.Errorf("fleet: register worker %s: %w", r.ID, err)
	}
	return nil
}

// Deregister removes a worker that is leaving.
func Deregister(ctx context.Context, js jetstream.JetStream, id string) error {
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", queue.WorkersBucket, err)
	}
	if err := kv.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("fleet: deregister worker %s: %w", id, err)
	}
	return nil
}

// Workers lists the registered workers, sorted by id. Registrations that do
// not decode are skipped: one bad writer must not hide the fleet.
func Workers(ctx context.Context, js jetstream.JetStream) ([]*Registration, error) {
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: open %s: %w", queue.WorkersBucket, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: list workers: %w", err)
	}
	var out []*Registration
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // deleted or expired since listed
		}
		var r Registration
		if json.Unmarshal(e.Value(), &r) == nil {
			r.Raw = e.Value()
			out = append(out, &r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
