package controller

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/flow"
)

// A native runtime takes any model of its provider (it has no model_flag,
// and needs none) and no args; a CLI runtime without a model_flag still
// cannot be given a model.
func TestResolveNativeRuntime(t *testing.T) {
	cfg := &config.Config{Runtimes: map[string]config.Runtime{
		"nat": {Adapter: "native", Model: "m", NativeRuntime: config.NativeRuntime{Provider: "anthropic"}},
		"cli": {Binary: "agent"},
	}}
	resolve := func(tasks ...flow.Task) error {
		_, err := Resolve(cfg, &flow.Spec{Repo: "/r", Tasks: tasks})
		return err
	}
	if err := resolve(flow.Task{ID: "a", Runtime: "nat", Model: "claude-opus-4-1"}); err != nil {
		t.Errorf("a model on a native runtime: %v", err)
	}
	err := resolve(flow.Task{ID: "a", Runtime: "nat", Args: []string{"--fast"}})
	if err == nil || !strings.Contains(err.Error(), "tasks[0].runtime: runtime nat is native, so args") {
		t.Errorf("args on a native runtime: %v", err)
	}
	err = resolve(flow.Task{ID: "a", Runtime: "cli", Model: "big"})
	if err == nil || !strings.Contains(err.Error(), "has no model_flag") {
		t.Errorf("a model on a CLI without model_flag: %v", err)
	}
}
