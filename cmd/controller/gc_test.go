package main

import (
	"runtime/debug"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestSetGCPercent: controller.gc_percent sets the collector's target,
// unless GOGC did.
func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	cfg := &config.Config{Controller: config.Controller{GCPercent: 37}}

	t.Setenv("GOGC", "")
	if got := setGCPercent(cfg); got != 37 {
		t.Errorf("without GOGC: %d, want 37", got)
	}
	if now := debug.SetGCPercent(37); now != 37 {
		t.Errorf("the runtime's target is %d, want 37", now)
	}

	debug.SetGCPercent(80) // as GOGC=80 at start would have
	t.Setenv("GOGC", "80")
	if got := setGCPercent(cfg); got != 80 {
		t.Errorf("with GOGC=80: %d, want 80", got)
	}
	if now := debug.SetGCPercent(80); now != 80 {
		t.Errorf("GOGC=80 was overridden: the target is %d", now)
	}
}
