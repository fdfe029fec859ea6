package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDemoScript runs what `make demo` runs, so the README's first command
// stays true.
func TestDemoScript(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/demo.sh")
	cmd.Env = append(cleanEnv(), "BIN="+bin, "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"succeeded", "+- `greet.sh` prints a greeting.", "+echo \"Goodbye\"",
		"Feedback from attempt 1", "farewell.sh printed: Bye", "equals the live projection", "demo finished"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
