package worker

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

func TestPauses(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	limited := func(e event.ErrorInfo) *event.Report {
		e.Class = drovertype.ClassRateLimited
		return &event.Report{Error: &e}
	}
	var p pauses
	for _, c := range []struct {
		name string
		rep  *event.Report
		ok   bool
		left time.Duration // of runtime r after it, at now
	}{
		{"a success", &event.Report{Success: true}, false, 0},
		{"another class", &event.Report{Error: &event.ErrorInfo{Class: drovertype.ClassTimeout}}, false, 0},
		{"no wait stated: the default", limited(event.ErrorInfo{}), true, time.Minute},
		{"a shorter wait keeps the longer pause", limited(event.ErrorInfo{RetryAfterMS: 3000}), true, time.Minute},
		{"a reset time", limited(event.ErrorInfo{ResetAt: now.Add(10 * time.Minute)}), true, 10 * time.Minute},
		{"capped", limited(event.ErrorInfo{RetryAfterMS: (48 * time.Hour).Milliseconds()}), true, time.Hour},
	} {
		if _, ok := p.limit("r", c.rep, now, time.Minute, time.Hour); ok != c.ok {
			t.Errorf("%s: paused=%v", c.name, ok)
		}
		if got := p.left("r", now); got != c.left {
			t.Errorf("%s: left %s, want %s", c.name, got, c.left)
		}
	}
	if p.left("other", now) != 0 || p.left("r", now.Add(2*time.Hour)) != 0 {
		t.Error("another runtime, or r after its pause, is paused")
	}

	// wait returns at once when not paused, and when its context ends.
	clock := func() time.Time { return now.Add(2 * time.Hour) }
	if !p.wait(context.Background(), "r", clock) {
		t.Error("wait after the pause")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.wait(ctx, "r", func() time.Time { return now }) {
		t.Error("wait returned true with its context ended")
	}
}
