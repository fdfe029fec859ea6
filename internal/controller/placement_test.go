package controller

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
)

// TestUnservedNeeds: submit warns of each runtime a flow needs that no
// live worker serves, naming the tasks and how they need it (their
// runtime, a fallback, the validator of a review), and says it cannot tell
// before it has read the registry.
func TestUnservedNeeds(t *testing.T) {
	file := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	c := New(cfg, nil, nil, slog.New(slog.DiscardHandler))
	spec, err := flow.Parse("f.yaml", []byte(`name: f
repo: /srv/r.git
runtime: claude-code
retry: {fallback: [codex]}
tasks:
  - {id: a, prompt: x}
  - {id: b, prompt: x, runtime: demo, review: true, validator: demo-review}
  - {id: c, prompt: x, runtime: demo}
  - {id: d, prompt: x}
  - {id: e, prompt: x}
  - {id: f, prompt: x}
  - {id: g, prompt: x}
`), flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := Accept(cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.unservedNeeds(spec, data.Plan); len(got) != 1 || got[0] != "the controller has not read the worker registry yet: it cannot tell whether live workers serve the flow's runtimes" {
		t.Errorf("before the registry is read: %q", got)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	c.fleet.Put(&fleet.Registration{ID: "w1", Pool: "default", Runtimes: []fleet.RuntimeHealth{
		{Name: "demo", Healthy: true}, {Name: "codex", Healthy: true}, {Name: "claude-code", Error: "claude: not found in PATH"}}}, now)
	c.fleet.Put(&fleet.Registration{ID: "w2", Pool: "gpu", Runtimes: []fleet.RuntimeHealth{{Name: "demo-review", Healthy: true}}}, now)
	c.fleet.SetReady(true)
	want := []string{
		"no live worker serves claude-code in pool default: 1 worker: claude: not found in PATH (needed as the runtime of tasks a, d, e, f, g)",
		"no live worker serves demo-review in pool default: 1 worker of 1 does not list it (needed as the validator of task b)",
	}
	if got := c.unservedNeeds(spec, data.Plan); !slices.Equal(got, want) {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
	if got := taskList([]string{"a", "b", "c", "d", "e", "f", "g"}); got != "tasks a, b, c, d, e and 2 more" {
		t.Errorf("taskList: %q", got)
	}
	// Served: nothing to warn of.
	c.fleet.Put(&fleet.Registration{ID: "w3", Pool: "default", Runtimes: []fleet.RuntimeHealth{
		{Name: "claude-code", Healthy: true}, {Name: "demo-review", Healthy: true}}}, now)
	if got := c.unservedNeeds(spec, data.Plan); got != nil {
		t.Errorf("all served, yet %q", got)
	}
}
