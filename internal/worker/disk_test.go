package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
)

func TestDiskGate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	free := uint64(10 << 30)
	sweeps := 0
	g := &diskGate{
		dir: "/work", min: config.ByteSize(1 << 30), now: func() time.Time { return now },
		free: func(string) (uint64, error) { return free, nil },
		sweep: func(_ context.Context, short func() bool) error {
			sweeps++
			for short() && free < 3<<30 {
				free += 1 << 29 // each kept worktree evicted frees 512 MiB
			}
			return nil
		},
	}
	ctx := context.Background()
	if err := g.check(ctx); err != nil {
		t.Fatalf("10 GiB free: %v", err)
	}
	// Below the minimum, within the cache period: the last answer holds.
	free = 100 << 20
	if err := g.check(ctx); err != nil {
		t.Fatalf("measured again too soon: %v", err)
	}
	// Measured again: a sweep of kept worktrees frees enough.
	now = now.Add(diskCheckEvery)
	if err := g.check(ctx); err != nil || sweeps != 1 || free < 1<<30 {
		t.Fatalf("after the sweep: %v (sweeps %d, free %d)", err, sweeps, free)
	}
	// Nothing left to sweep: the worker stops claiming and says why.
	g.sweep = func(context.Context, func() bool) error { sweeps++; return nil }
	free = 300 << 20
	now = now.Add(diskCheckEvery)
	err := g.check(ctx)
	if err == nil || !strings.Contains(err.Error(), "free disk 300 MiB in /work is below worker.min_free_disk 1.0 GiB") {
		t.Fatalf("low disk: %v", err)
	}
	// Space freed by the operator: claiming resumes at the next measure.
	free = 5 << 30
	now = now.Add(diskCheckEvery)
	if err := g.check(ctx); err != nil {
		t.Fatalf("space freed: %v", err)
	}
	// 0 disables the check.
	g.min, free = 0, 0
	now = now.Add(diskCheckEvery)
	if err := g.check(ctx); err != nil {
		t.Errorf("check disabled: %v", err)
	}
}
