package fleet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// RegistrationTTL is how long a worker's registration lives without renewal;
// workers renew every RegistrationTTL/4.
const RegistrationTTL = queue.WorkersTTL

// Registration is what a worker tells the fleet about itself.
type Registration struct {
	ID    string `json:"id"`
	Host  string `json:"host"`
	Pool  string `json:"pool"`
	Slots int    `json:"slots"`
	Busy  int    `json:"busy"`
	// Finishing are the attempts that gave their slot back to push and
	// report (they are not in Busy).
	Finishing int             `json:"finishing,omitempty"`
	Started   time.Time       `json:"started"`
	Seen      time.Time       `json:"seen"`
	Runtimes  []RuntimeHealth `json:"runtimes"`
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
	return put(ctx, js, queue.WorkersBucket, r.ID, "worker "+r.ID, r)
}

// Deregister removes a worker that is leaving.
func Deregister(ctx context.Context, js jetstream.JetStream, id string) error {
	return remove(ctx, js, queue.WorkersBucket, id, "worker "+id)
}

// Workers lists the registered workers, sorted by id. Registrations that do
// not decode are skipped: one bad writer must not hide the fleet.
func Workers(ctx context.Context, js jetstream.JetStream) ([]*Registration, error) {
	return list(ctx, js, queue.WorkersBucket, func(_ string, raw []byte) *Registration {
		var r Registration
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		r.Raw = raw
		return &r
	})
}
