package adapter

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestWorkerSecretsWithheld: the worker's own configuration and credentials
// (DROVER_* variables: NATS password, token, key files) never reach a CLI,
// nor do the usual credential variables unless the runtime passes them.
func TestWorkerSecretsWithheld(t *testing.T) {
	for k, v := range map[string]string{
		"DROVER_NATS_PASSWORD":   "nats-pass-123456",
		"DROVER_NATS_TOKEN":      "nats-token-123456",
		"DROVER_NATS_NKEY_FILE":  "/etc/drover/worker.nk",
		"DROVER_NATS_CREDS_FILE": "/etc/drover/worker.creds",
		"DROVER_CONFIG":          "/etc/drover/config.yaml",
		"AWS_SECRET_ACCESS_KEY":  "aws-secret-123456",
		"GITHUB_TOKEN":           "ghp-123456",
		"SSH_AUTH_SOCK":          "/run/agent.sock",
	} {
		t.Setenv(k, v)
	}
	ad := NewCommand("x", config.Runtime{Binary: script(t, "exit 0")})
	c, err := ad.Command(&Input{Prompt: "p", TempDir: t.TempDir(), Env: []string{"DROVER_ATTEMPT_ID=a1"}})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(c.Env, "\n")
	for _, leak := range []string{"nats-pass", "nats-token", "worker.nk", "worker.creds", "DROVER_CONFIG", "aws-secret", "ghp-", "SSH_AUTH_SOCK"} {
		if strings.Contains(env, leak) {
			t.Errorf("%s reached the CLI:\n%s", leak, env)
		}
	}
	if !strings.Contains(env, "DROVER_ATTEMPT_ID=a1") {
		t.Errorf("Drover's own attempt variables are missing:\n%s", env)
	}
}
