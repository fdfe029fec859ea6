package worker

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestSecretsMasked: the worker masks the values of the secret variables its
// runtimes pass through or set, and its own NATS password and token; other
// values stay readable.
func TestSecretsMasked(t *testing.T) {
	t.Setenv("MY_API_KEY", "passthrough-secret-1")
	t.Setenv("MY_REGION", "eu-west-1-region")
	cfg := &config.Config{
		Worker: config.Worker{Runtimes: []string{"agent"}},
		Runtimes: map[string]config.Runtime{"agent": {
			EnvPassthrough: []string{"MY_API_KEY", "MY_REGION"},
			Env:            []string{"AGENT_TOKEN=fixed-secret-2", "AGENT_MODE=plain-value-3"},
		}},
		NATS: config.NATS{User: "worker", Password: "nats-password-4", Token: "nats-token-5"},
	}
	in := "passthrough-secret-1 fixed-secret-2 nats-password-4 nats-token-5 eu-west-1-region plain-value-3"
	got := string(secrets(cfg).Bytes([]byte(in)))
	want := "[REDACTED] [REDACTED] [REDACTED] [REDACTED] eu-west-1-region plain-value-3"
	if got != want {
		t.Errorf("masked %q\n got %q\nwant %q", in, got, want)
	}
	if strings.Contains(string(secrets(&config.Config{}).Bytes([]byte("x"))), "REDACTED") {
		t.Error("an empty configuration masks something")
	}
}
