package projection

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Placement is what the log says about the live workers serving a runtime
// in a pool (placement_changed): whether none does now, since when, and
// for how long none did before. The placement timeout of a queued attempt
// counts only the time no worker served its runtime after it was
// scheduled (Attempt.UnservedBeforeMS), so it is read from the log, not
// from a controller's memory (docs/design.md#placement).
type Placement struct {
	Key     string `json:"key"` // event.PlacementKey(Pool, Runtime)
	Pool    string `json:"pool"`
	Runtime string `json:"runtime"`
	Seq     int    `json:"seq"`
	// Live and Serving count the live workers in the pool and those that
	// serve the runtime, at the last finding.
	Live    int `json:"live"`
	Serving int `json:"serving"`
	// Reason says why no live worker serves it; "" while one does.
	Reason string `json:"reason,omitempty"`
	// Since is when the stretch without a worker began; zero while one
	// serves it. EndedMS sums the stretches that have ended.
	Since   time.Time `json:"since,omitzero"`
	EndedMS int64     `json:"ended_ms,omitempty"`
	// ChangedAt is the last finding's time, Attempt the attempt its event
	// named (a later finding with nothing queued names it again).
	ChangedAt time.Time `json:"changed_at"`
	Attempt   string    `json:"attempt"`
}

// Unserved reports whether no live worker serves the runtime now, as far
// as the log says.
func (p *Placement) Unserved() bool { return p != nil && !p.Since.IsZero() }

// UnservedBy is how long, in all, no live worker served the runtime up to
// at (the stretch open at at counted up to it).
func (p *Placement) UnservedBy(at time.Time) time.Duration {
	if p == nil {
		return 0
	}
	d := time.Duration(p.EndedMS) * time.Millisecond
	if p.Unserved() && at.After(p.Since) {
		d += at.Sub(p.Since)
	}
	return d
}

// Bounds of what a placement keeps, whatever its events say.
const maxPlacementReason = 1024

func (s *State) placementChanged(ev *event.Event, d *event.PlacementChangedData) error {
	switch {
	case drovertype.ValidID(d.Pool) != nil || drovertype.ValidID(d.Runtime) != nil:
		return malformed("placement_changed of pool %.70q, runtime %.70q", d.Pool, d.Runtime)
	case d.Seq < 1 || d.Live < 0 || d.Serving < 0 || d.Serving > d.Live:
		return malformed("placement_changed %d with %d of %d live workers serving", d.Seq, d.Serving, d.Live)
	case ev.ID != drovertype.EventID(event.PlacementChanged, fmt.Sprintf("%s:%d", ev.Attempt, d.Seq)):
		return malformed("placement_changed %d has the id %.80q, not <attempt>:<seq>", d.Seq, ev.ID)
	}
	a, err := s.attempt(ev)
	if err != nil {
		return err
	}
	if a.Pool != d.Pool || a.Runtime != d.Runtime {
		return malformed("placement_changed of %s in pool %s names attempt %s, on %s in pool %s", d.Runtime, d.Pool, a.ID, a.Runtime, a.Pool)
	}
	key := event.PlacementKey(d.Pool, d.Runtime)
	p := s.Placements[key]
	if p == nil {
		p = &Placement{Key: key, Pool: d.Pool, Runtime: d.Runtime}
	}
	if d.Seq != p.Seq+1 {
		return nil // made twice, or out of turn
	}
	switch {
	case d.Serving == 0 && !p.Unserved():
		p.Since = ev.Time
	case d.Serving > 0 && p.Unserved():
		if ev.Time.After(p.Since) {
			p.EndedMS += ev.Time.Sub(p.Since).Milliseconds()
		}
		p.Since = time.Time{}
	}
	p.Reason = ""
	if d.Serving == 0 {
		p.Reason = clipText(d.Reason, maxPlacementReason)
	}
	p.Seq, p.Live, p.Serving, p.ChangedAt, p.Attempt = d.Seq, d.Live, d.Serving, ev.Time, a.ID
	s.Placements[key] = p
	s.mark(keyPlacement + key)
	return nil
}

// attemptUnplaced ends a queued attempt that no live worker took for its
// placement timeout: it failed with NO_WORKER, and its task awaits the
// controller's decision like any failure's.
func (s *State) attemptUnplaced(ev *event.Event, d *event.AttemptUnplacedData) error {
	a, err := s.attempt(ev)
	if err != nil || a.State != drovertype.AttemptScheduled {
		return err // a worker claimed it first, or it ended otherwise
	}
	a.State, a.EndedAt, a.Phase = drovertype.AttemptFailed, ev.Time, ev.Type
	a.Error = &event.ErrorInfo{Class: drovertype.ClassNoWorker, Category: drovertype.CategoryInfrastructure, Recoverable: true,
		Message: clipText(d.Reason, maxPlacementReason)}
	s.touchAttempt(a)
	if t := s.Task(a.Flow, a.Task); t != nil && t.Attempt == a.ID && t.State == drovertype.TaskScheduled {
		t.State = drovertype.TaskRunning
		s.touchTask(t, ev)
	}
	return nil
}

// Unplaced returns the placement that keeps a task's queued attempt
// waiting, nil when it does not wait for a worker: the attempt is queued,
// no worker has claimed it, and no live worker serves its runtime in its
// pool.
func (s *State) Unplaced(t *Task) *Placement {
	if t.State != drovertype.TaskScheduled {
		return nil
	}
	a := s.Attempts[t.Attempt]
	if a == nil || a.State != drovertype.AttemptScheduled {
		return nil
	}
	if p := s.Placements[event.PlacementKey(a.Pool, a.Runtime)]; p.Unserved() {
		return p
	}
	return nil
}

// WaitWhy says why a task does not run, "" when nothing holds it back
// that the log knows of: the cooldowns in its way (Waiting), or no live
// worker serving its queued attempt's runtime (Unplaced). since is when
// that began.
func (s *State) WaitWhy(t *Task) (why string, since time.Time) {
	if w := t.Waiting(); w != nil {
		return w.Reason, w.Since
	}
	if p := s.Unplaced(t); p != nil {
		return p.Reason, later(p.Since, s.Attempts[t.Attempt].ScheduledAt)
	}
	return "", time.Time{}
}
