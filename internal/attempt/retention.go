package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/drovertype"
)

// The work dir's layout: worktrees, per-attempt scratch dirs, and the
// records of failed worktrees kept for inspection. Kept records live apart
// from the worktrees: a file beside a worktree is a scope violation for
// every attempt running next to it.
const (
	worktreesDir = "worktrees"
	tmpDir       = "tmp"
	keptDir      = "kept"
)

// keptRecord marks a failed attempt's worktree kept for inspection.
type keptRecord struct {
	Attempt string                `json:"attempt"`
	Path    string                `json:"path"`
	KeptAt  time.Time             `json:"kept_at"`
	Class   drovertype.ErrorClass `json:"class,omitempty"`
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// use marks scratch paths as in use until the returned func is called.
func (r *Runner) use(paths ...string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]int{}
	}
	for _, p := range paths {
		r.live[p]++
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range paths {
			if r.live[p]--; r.live[p] <= 0 {
				delete(r.live, p)
			}
		}
	}
}

func (r *Runner) inUse(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[p] > 0
}

// keep records a failed attempt's worktree as kept for inspection.
func (r *Runner) keep(job *Job, wtPath string, rep *event.Report) error {
	dir := filepath.Join(r.WorkDir, keptDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("attempt: %w", err)
	}
	rec := keptRecord{Attempt: job.Attempt, Path: wtPath, KeptAt: r.now().UTC()}
	if rep.Error != nil {
		rec.Class = rep.Error.Class
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("attempt: %w", err)
	}
	name := filepath.Join(dir, filepath.Base(wtPath)+".json")
	if err := os.WriteFile(name+".tmp", data, 0o644); err != nil {
		return fmt.Errorf("attempt: %w", err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return fmt.Errorf("attempt: %w", err)
	}
	r.Logger.Info("keeping failed worktree", "attempt", job.Attempt, "path", wtPath, "for", r.KeepFailed)
	return nil
}

// kept reads the records of kept worktrees; unreadable ones count as
// expired.
func (r *Runner) kept() map[string]keptRecord {
	dir := filepath.Join(r.WorkDir, keptDir)
	entries, _ := os.ReadDir(dir)
	out := map[string]keptRecord{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var rec keptRecord
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && json.Unmarshal(data, &rec) == nil {
			// The path is ours to compute, never the record's to say.
			rec.Path = filepath.Join(r.WorkDir, worktreesDir, strings.TrimSuffix(e.Name(), ".json"))
			out[rec.Path] = rec
		}
	}
	return out
}

// Sweep removes what the work dir no longer needs: worktrees and scratch
// dirs of attempts that no longer run here (a previous process of this
// worker died holding them), and failed worktrees kept longer than
// KeepFailed. While short() reports the disk short of space, kept
// worktrees go too, oldest first, before their time. short may be nil.
func (r *Runner) Sweep(ctx context.Context, short func() bool) error {
	if r.KeepWorktrees {
		return nil
	}
	now := r.now()
	kept := r.kept()
	keep := map[string]bool{}
	var byAge []keptRecord
	for p, rec := range kept {
		if rec.KeptAt.Add(r.KeepFailed).After(now) {
			keep[p] = true
			byAge = append(byAge, rec)
		}
	}
	if short != nil && r.Checkouts.Idle() > 0 && short() {
		// Parked checkouts are only a speed-up; they go first.
		if err := r.Checkouts.DropIdle(ctx); err != nil {
			r.Logger.Warn("disk short: removing parked checkouts", "err", err)
		}
	}
	sort.Slice(byAge, func(i, j int) bool { return byAge[i].KeptAt.Before(byAge[j].KeptAt) })
	for _, rec := range byAge {
		if short == nil || !short() {
			break
		}
		if r.inUse(rec.Path) {
			continue
		}
		if err := os.RemoveAll(rec.Path); err != nil {
			return fmt.Errorf("attempt: evict kept worktree: %w", err)
		}
		delete(keep, rec.Path)
		r.Logger.Warn("disk short: removed a kept failed worktree early", "attempt", rec.Attempt, "path", rec.Path)
	}
	var errs []error
	removed, err := r.Checkouts.Sweep(ctx, filepath.Join(r.WorkDir, worktreesDir), func(p string) bool {
		return keep[p] || r.inUse(p)
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(removed) > 0 {
		r.Logger.Info("swept worktrees", "removed", len(removed))
	}
	// Scratch dirs of runs that died, and records of worktrees now gone.
	if entries, err := os.ReadDir(filepath.Join(r.WorkDir, tmpDir)); err == nil {
		for _, e := range entries {
			if p := filepath.Join(r.WorkDir, tmpDir, e.Name()); !r.inUse(p) {
				if err := os.RemoveAll(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for p := range kept {
		if !keep[p] {
			if err := os.Remove(filepath.Join(r.WorkDir, keptDir, filepath.Base(p)+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
