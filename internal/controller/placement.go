package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// Placement: no task waits in silence (docs/design.md#placement). The
// controller follows the worker registry (fleetLoop). When no live worker
// serves the runtime a queued attempt needs in its pool, it records that
// as a fact about the fleet (placement_changed, with why: "no live worker
// serves claude-code in pool default: 2 workers: claude not in PATH"),
// and again when a worker serves it; `status`, `watch` and the console
// show the reason on every task waiting for it. An attempt that waited
// for its task's placement_timeout while none served it — time queued
// behind busy workers does not count — is taken back and fails NO_WORKER,
// and the retry policy moves the task to its fallback. The time is read
// from the log, so a restarted controller, or another taking over, decides
// the same.

// placing is one round's view of the pools' runtimes its queued attempts
// need: what the registry says of each, found once per round (a round
// asks for every queued attempt, and a large flow queues thousands: the
// pair is a struct key, so asking allocates nothing). The live workers
// are read when the round first asks (live): a round with nothing queued
// and no runtime waiting for a worker reads none, and a fleet of 1,000
// workers, whose renewals each wake a round, had every round list and
// sort them all (nine tenths of what deciding cost a finished flow's
// controller).
type placing struct {
	read  func() ([]*fleet.Registration, bool) // nil once read
	ok    bool                                 // the registry has been read: without it nothing is decided
	regs  []*fleet.Registration                // the live workers
	pairs map[pair]*paired
}

// pair is a runtime in a pool.
type pair struct{ pool, runtime string }

// paired is what a round found of a pair: the registry's word, and the
// log's (nil when it says nothing).
type paired struct {
	now fleet.Serving
	rec *projection.Placement
}

func newPlacing(c *Controller, now time.Time) *placing {
	return &placing{pairs: map[pair]*paired{}, read: func() ([]*fleet.Registration, bool) {
		if c.fleet != nil && c.connected() {
			return c.fleet.Live(now)
		}
		return nil, false
	}}
}

// live reads the live workers, the first time a round asks, and reports
// whether the registry has been read.
func (p *placing) live() bool {
	if p.read != nil {
		p.regs, p.ok = p.read()
		p.read = nil
	}
	return p.ok
}

// connected reports whether the controller hears NATS now: a registry it
// cannot hear says nothing about the fleet.
func (c *Controller) connected() bool {
	if c.js == nil {
		return true // the decision scenarios' controller, which has no NATS
	}
	nc := c.js.Conn()
	return nc != nil && nc.IsConnected()
}

// serving says how the fleet serves a's runtime in its pool, and what the
// log says of it; the first time a round asks, it records a change from
// what the log says, naming a.
func (dc *decider) serving(a *projection.Attempt) (*paired, error) {
	k := pair{a.Pool, a.Runtime}
	if p := dc.place.pairs[k]; p != nil {
		return p, nil
	}
	dc.place.live()
	p := &paired{now: fleet.Place(dc.place.regs, a.Pool, a.Runtime), rec: dc.st.Placements[event.PlacementKey(a.Pool, a.Runtime)]}
	dc.place.pairs[k] = p
	return p, dc.placementChanged(p.rec, p.now, a)
}

// placementChanged records what the fleet says of a pool's runtime when it
// differs from the log (rec, nil when the log says nothing): none serves
// it (or none does for another reason), or one does again.
func (dc *decider) placementChanged(rec *projection.Placement, s fleet.Serving, a *projection.Attempt) error {
	why := s.Why()
	switch {
	case s.Serving == 0 && rec.Unserved() && rec.Reason == why:
		return nil
	case s.Serving > 0 && !rec.Unserved():
		return nil
	}
	seq := 1
	if rec != nil {
		seq = rec.Seq + 1
	}
	return dc.add(fmt.Sprintf("%s:%d", a.ID, seq), event.PlacementChanged, a.Flow, a.Task, a.ID, event.PlacementChangedData{
		Pool: a.Pool, Runtime: a.Runtime, Seq: seq, Live: s.Live, Serving: s.Serving, Reason: why})
}

// unplaced takes back a task's queued attempt once no live worker has
// served its runtime for the task's placement timeout since it was
// scheduled, as the log tells it; it reports whether it did. The clock
// starts with the fold of the finding: an attempt never fails for what
// was not recorded.
func (dc *decider) unplaced(t *projection.Task, a *projection.Attempt) (bool, error) {
	if !dc.place.live() {
		return false, nil
	}
	p, err := dc.serving(a)
	if err != nil || p.now.Serving > 0 {
		return false, err
	}
	rec := p.rec
	if !rec.Unserved() {
		return false, nil
	}
	unserved := rec.UnservedBy(dc.now) - time.Duration(a.UnservedBeforeMS)*time.Millisecond
	timeout := t.Plan.Placement()
	if unserved < timeout {
		return false, nil
	}
	detail := strings.TrimPrefix(rec.Reason, fmt.Sprintf("no live worker serves %s in pool %s: ", a.Runtime, a.Pool))
	reason := fmt.Sprintf("no live worker served %s in pool %s for %s, its placement_timeout: %s",
		a.Runtime, a.Pool, unserved.Round(time.Second), detail)
	dc.out = append(dc.out, action{unplace: a, reason: clip(reason, 1000),
		unplaced: event.AttemptUnplacedData{UnservedMS: unserved.Milliseconds(), TimeoutMS: timeout.Milliseconds()}})
	return true, nil
}

// servedAgain records that a worker serves a pool's runtime again when
// the log says none does and no queued attempt asked this round: the
// stretch without a worker has ended, whoever waits next.
func (dc *decider) servedAgain() error {
	for _, key := range slices.Sorted(maps.Keys(dc.st.Placements)) {
		rec := dc.st.Placements[key]
		if _, asked := dc.place.pairs[pair{rec.Pool, rec.Runtime}]; asked || !rec.Unserved() {
			continue
		}
		a := dc.st.Attempts[rec.Attempt]
		if a == nil {
			continue
		}
		if !dc.place.live() {
			return nil
		}
		if s := fleet.Place(dc.place.regs, rec.Pool, rec.Runtime); s.Serving > 0 {
			if err := dc.placementChanged(rec, s, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// unplacement is what taking back an unplaced attempt records (the
// decision scenarios fold it too).
func (c *Controller) unplacement(a *projection.Attempt, reason string, d event.AttemptUnplacedData) (*event.Event, error) {
	d.Reason = reason
	return event.New(drovertype.EventID(event.AttemptUnplaced, a.ID), event.AttemptUnplaced, c.now(), a.Flow, a.Task, a.ID, 0, d)
}

// fleetLoop follows the worker registry into c.fleet until ctx ends,
// waking the decisions at each change. A watch that fails, or a
// connection to NATS that drops, empties the view until it is read again
// whole: the decisions know nothing of the fleet meanwhile.
func (c *Controller) fleetLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- fleet.Follow(wctx, c.js, c.fleet, c.now, c.poke) }()
		err, ended := c.watchConnection(ctx, done)
		stop()
		if !ended {
			err = <-done
		}
		c.fleet.Reset()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("follow the worker registry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// watchConnection returns when the registry's watch ends (its error, and
// ended), or when ctx ends or the connection to NATS drops or has been
// made again: the watch is then started anew, so that what changed
// meanwhile is read.
func (c *Controller) watchConnection(ctx context.Context, done <-chan error) (err error, ended bool) {
	nc := c.js.Conn()
	reconnects := nc.Stats().Reconnects
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case err := <-done:
			if err == nil && ctx.Err() == nil {
				err = errors.New("controller: the registry's watch ended")
			}
			return err, true
		case <-t.C:
			if !nc.IsConnected() || nc.Stats().Reconnects != reconnects {
				c.poke()
				return nil, false
			}
		}
	}
}

// WaitStatus is why a task waits, as status shows it: a cooldown in its
// way, or no live worker serving its queued attempt's runtime.
type WaitStatus struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// PlacementStatus is a pool's runtime that no live worker serves now, as
// the log says, with why: every attempt queued for it waits.
type PlacementStatus struct {
	Pool    string    `json:"pool"`
	Runtime string    `json:"runtime"`
	Since   time.Time `json:"since"`
	Live    int       `json:"live"`
	Reason  string    `json:"reason"`
}

// placements lists the pools' runtimes no live worker serves, by key.
func placements(st *projection.State) []PlacementStatus {
	var out []PlacementStatus
	for _, k := range slices.Sorted(maps.Keys(st.Placements)) {
		if p := st.Placements[k]; p.Unserved() {
			out = append(out, PlacementStatus{Pool: p.Pool, Runtime: p.Runtime, Since: p.Since, Live: p.Live, Reason: p.Reason})
		}
	}
	return out
}

// waits says why each of a flow's waiting tasks waits, nil when none does.
func waits(st *projection.State, tasks []*projection.Task) map[string]*WaitStatus {
	var out map[string]*WaitStatus
	for _, t := range tasks {
		if why, since := st.WaitWhy(t); why != "" {
			if out == nil {
				out = map[string]*WaitStatus{}
			}
			out[t.ID] = &WaitStatus{Reason: why, Since: since}
		}
	}
	return out
}

// unservedNeeds warns of each runtime a flow needs that no live worker
// serves in the pool its attempts are queued for, saying which tasks need
// it and how: as their runtime, a fallback, or the validator of a review.
// Before the registry has been read, it says it cannot tell (and a strict
// submission is refused: it asked to be sure).
func (c *Controller) unservedNeeds(spec *flow.Spec, plans map[string]policy.Resolved) []string {
	regs, ok := c.fleet.Live(c.now())
	if !ok || !c.connected() {
		return []string{"the controller has not read the worker registry yet: it cannot tell whether live workers serve the flow's runtimes"}
	}
	const (
		asRuntime   = "the runtime"
		asFallback  = "a fallback"
		asValidator = "the validator"
	)
	needs := map[string]map[string][]string{} // runtime -> role -> tasks, in file order
	add := func(runtime, role, task string) {
		if runtime == "" {
			return
		}
		if needs[runtime] == nil {
			needs[runtime] = map[string][]string{}
		}
		if ts := needs[runtime][role]; len(ts) == 0 || ts[len(ts)-1] != task {
			needs[runtime][role] = append(ts, task)
		}
	}
	for _, t := range spec.Tasks {
		p, ok := plans[t.ID]
		if !ok {
			continue
		}
		add(p.Worker.Name, asRuntime, t.ID)
		for _, fb := range p.Retry.Fallback {
			if fb != p.Worker.Name {
				add(fb, asFallback, t.ID)
			}
		}
		if p.Review && p.Validator != nil {
			add(p.Validator.Name, asValidator, t.ID)
		}
	}
	var out []string
	for _, runtime := range slices.Sorted(maps.Keys(needs)) {
		s := fleet.Place(regs, c.cfg.Defaults.Pool, runtime)
		if s.Serving > 0 {
			continue
		}
		var roles []string
		for _, role := range []string{asRuntime, asFallback, asValidator} {
			if ts := needs[runtime][role]; len(ts) > 0 {
				roles = append(roles, fmt.Sprintf("%s of %s", role, taskList(ts)))
			}
		}
		out = append(out, fmt.Sprintf("%s (needed as %s)", s.Why(), strings.Join(roles, "; ")))
	}
	return out
}

// taskList names tasks for a warning: the first few, and how many more.
func taskList(ids []string) string {
	const shown = 5
	word := "task "
	if len(ids) > 1 {
		word = "tasks "
	}
	if len(ids) <= shown {
		return word + strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s%s and %d more", word, strings.Join(ids[:shown], ", "), len(ids)-shown)
}
