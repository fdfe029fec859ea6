package attempt

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFailedWorktreesAreKeptThenSwept: a succeeded attempt's worktree goes
// at once; a failed one's stays for KeepFailed, then a sweep removes it,
// earlier when the disk is short, oldest first. Leftovers of a run that died
// are swept whatever their age.
func TestFailedWorktreesAreKeptThenSwept(t *testing.T) {
	h := newHarness(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h.runner.KeepFailed = time.Hour
	h.runner.Now = func() time.Time { return now }
	wt := func(j *Job) string { return filepath.Join(h.runner.WorkDir, worktreesDir, j.Attempt+"-e1") }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	ok := h.job("echo ok > ok.txt")
	if rep, _ := h.run(ok, nil); !rep.Success {
		t.Fatalf("ok: %+v", rep)
	}
	failed1 := h.job("echo half > half.txt; exit 3")
	if rep, _ := h.run(failed1, nil); rep.Success {
		t.Fatal("failed1 succeeded")
	}
	now = now.Add(10 * time.Minute)
	failed2 := h.job("exit 4")
	if rep, _ := h.run(failed2, nil); rep.Success {
		t.Fatal("failed2 succeeded")
	}
	if exists(wt(ok)) {
		t.Error("the succeeded attempt's worktree was kept")
	}
	if !exists(filepath.Join(wt(failed1), "half.txt")) || !exists(wt(failed2)) {
		t.Fatal("the failed attempts' worktrees were not kept")
	}
	// A run that died: its worktree dir and scratch dir are left behind.
	dead := filepath.Join(h.runner.WorkDir, worktreesDir, "f_t_99-e1")
	deadTmp := filepath.Join(h.runner.WorkDir, tmpDir, "f_t_99-e1")
	for _, d := range []string{dead, deadTmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	if err := h.runner.Sweep(ctx, nil); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if exists(dead) || exists(deadTmp) {
		t.Error("a dead run's leftovers survived the sweep")
	}
	if !exists(wt(failed1)) || !exists(wt(failed2)) {
		t.Fatal("kept worktrees swept before their time")
	}

	// The disk is short: the oldest kept worktree goes first, and only as
	// many as needed.
	short := 1
	if err := h.runner.Sweep(ctx, func() bool { short--; return short >= 0 }); err != nil {
		t.Fatal(err)
	}
	if exists(wt(failed1)) || !exists(wt(failed2)) {
		t.Errorf("short disk: failed1 kept=%v failed2 kept=%v, want only the newer kept", exists(wt(failed1)), exists(wt(failed2)))
	}

	// Past KeepFailed, the rest goes, with its record.
	now = now.Add(time.Hour)
	if err := h.runner.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if exists(wt(failed2)) {
		t.Error("a kept worktree outlived KeepFailed")
	}
	if entries, _ := os.ReadDir(filepath.Join(h.runner.WorkDir, keptDir)); len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
	// Its branch is gone from the cache too: the branch can be used again.
	again := *failed2
	again.Epoch = 2
	if rep, _ := h.run(&again, nil); rep.Success {
		t.Error("the rerun of a failing prompt succeeded")
	}
}
