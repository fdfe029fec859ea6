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

// TestNativeKeyMasked: a native runtime's API key is masked whatever its
// variable is called (a name the secret-name pattern misses), whether the
// runtime is served here or only configured (a validator may be any).
func TestNativeKeyMasked(t *testing.T) {
	t.Setenv("LLM_CRED_A", "native-key-served-1")
	t.Setenv("LLM_CRED_B", "native-key-validator-2")
	t.Setenv("LLM_REGION", "plain-region-3")
	native := func(env string) config.Runtime {
		return config.Runtime{Adapter: "native", NativeRuntime: config.NativeRuntime{Provider: "openai-chat", APIKeyEnv: env}}
	}
	cfg := &config.Config{
		Worker:   config.Worker{Runtimes: []string{"a"}},
		Runtimes: map[string]config.Runtime{"a": native("LLM_CRED_A"), "b": native("LLM_CRED_B"), "c": {EnvPassthrough: []string{"LLM_REGION"}}},
	}
	in := "native-key-served-1 native-key-validator-2 plain-region-3"
	if got, want := string(secrets(cfg).Bytes([]byte(in))), "[REDACTED] [REDACTED] plain-region-3"; got != want {
		t.Errorf("masked %q\n got %q\nwant %q", in, got, want)
	}
}
