package projection

import (
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Cooldown is a limit the fleet met: until Until no attempt in its scope
// starts anywhere; after it, one attempt goes first (Probe), and its
// success releases the cooldown (docs/design.md#cooldowns). It is the fold
// of cooldown_started and cooldown_released; whether it is still cooling
// depends on the clock, which the fold never reads (see State.CooldownsFor).
type Cooldown struct {
	Key   string `json:"key"` // event.CooldownKey(Scope, Name)
	Scope string `json:"scope"`
	Name  string `json:"name"`
	// Runtimes are, for a credential, the runtimes known to use it.
	Runtimes []string `json:"runtimes,omitempty"`
	// Step counts the limits its probes met, from 1: the backoff.
	Step   int       `json:"step"`
	From   time.Time `json:"from"`
	Until  time.Time `json:"until"`
	Source string    `json:"source"`
	// What set Until: the limit met, where, by which attempt.
	Class   drovertype.ErrorClass `json:"class"`
	Cause   string                `json:"cause"`
	Runtime string                `json:"runtime"`
	Flow    string                `json:"flow"`
	Attempt string                `json:"attempt"`
	// StartedAt is when the controller decided it; InFlight how many other
	// attempts ran in its scope then; Limited how many attempts met the
	// limit since (those in flight, and probes).
	StartedAt time.Time `json:"started_at"`
	InFlight  int       `json:"in_flight,omitempty"`
	Limited   int       `json:"limited"`
	// Probe is the attempt that goes first once Until has passed.
	Probe         string    `json:"probe,omitempty"`
	Released      bool      `json:"released,omitempty"`
	ReleasedAt    time.Time `json:"released_at,omitzero"`
	ReleaseReason string    `json:"release_reason,omitempty"`
}

// Cooling reports whether c still holds back every attempt in its scope.
func (c *Cooldown) Cooling(now time.Time) bool { return !c.Released && now.Before(c.Until) }

// Applies reports whether c holds back an attempt on runtime asking for
// model ("" for the runtime's default).
func (c *Cooldown) Applies(runtime, model string) bool {
	switch c.Scope {
	case event.CooldownRuntime:
		return c.Name == runtime
	case event.CooldownModel:
		return model != "" && c.Name == model
	case event.CooldownCredential:
		return slices.Contains(c.Runtimes, runtime)
	}
	return false
}

// TaskWait is why a task ready to start does not (task_waiting).
type TaskWait struct {
	// N is the attempt that waits: the wait holds while it is the task's next.
	N         int       `json:"n"`
	Cooldowns []string  `json:"cooldowns"`
	Until     time.Time `json:"until,omitzero"`
	Reason    string    `json:"reason"`
	// Since is when the task began to wait for attempt N, whatever the
	// reasons recorded since.
	Since time.Time `json:"since"`
}

// Waiting returns why the task waits, or nil when it is not waiting: a
// wait holds while the task, pending or retrying, has not started the
// attempt it was about.
func (t *Task) Waiting() *TaskWait {
	w := t.Wait
	if w == nil || w.N != t.Attempts+1 || (t.State != drovertype.TaskPending && t.State != drovertype.TaskRetrying) {
		return nil
	}
	return w
}

// Bounds of what a cooldown keeps, whatever the events say.
const (
	maxCooldownRuntimes = 64
	maxCooldownCause    = 512
	maxCooldownName     = 256
)

func (s *State) cooldownStarted(ev *event.Event, d *event.CooldownStartedData) error {
	if err := checkCooldown(d.Scope, d.Name); err != nil {
		return err
	}
	if d.Step < 1 || d.Until.Before(d.From) {
		return fmt.Errorf("%w: cooldown_started with step %d, from %s until %s", event.ErrDecode, d.Step, d.From, d.Until)
	}
	key := event.CooldownKey(d.Scope, d.Name)
	s.Cooldowns[key] = s.Cooldowns[key].After(ev, d)
	s.mark(keyCooldown + key)
	return nil
}

// After returns what folding cooldown_started ev (payload d) over c gives;
// c, which may be nil, is not changed. The controller's decisions use it to
// see a cooldown they decided in the round before it is folded.
func (c *Cooldown) After(ev *event.Event, d *event.CooldownStartedData) *Cooldown {
	key := event.CooldownKey(d.Scope, d.Name)
	var n Cooldown
	switch {
	case c == nil || c.Released:
		n = Cooldown{Key: key, Scope: d.Scope, Name: d.Name, Step: d.Step, From: d.From, Until: d.Until,
			StartedAt: ev.Time, InFlight: d.InFlight}
		n.set(ev, d)
	case d.Step > c.Step:
		// A limit met by the probe, or by an attempt that started after
		// the cooldown: it backs off.
		n = *c
		n.Step, n.From, n.Probe = d.Step, d.From, ""
		n.Until = later(c.Until, d.Until)
		n.set(ev, d)
	case d.Until.After(c.Until):
		// An attempt that was running when it began met the limit later.
		n = *c
		n.Until = d.Until
		n.set(ev, d)
	default:
		n = *c
	}
	n.Limited++
	if ev.Attempt != "" && ev.Attempt == n.Probe {
		n.Probe = "" // its probe met the limit: the next attempt probes
	}
	n.Runtimes = slices.Clone(n.Runtimes)
	for _, r := range d.Runtimes {
		if len(n.Runtimes) < maxCooldownRuntimes && r != "" && !slices.Contains(n.Runtimes, r) {
			n.Runtimes = append(n.Runtimes, r)
		}
	}
	slices.Sort(n.Runtimes)
	return &n
}

// set records what set the cooldown's end.
func (c *Cooldown) set(ev *event.Event, d *event.CooldownStartedData) {
	c.Source, c.Class, c.Cause, c.Runtime = d.Source, d.Class, clipText(d.Cause, maxCooldownCause), d.Runtime
	c.Flow, c.Attempt = ev.Flow, ev.Attempt
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *State) cooldownReleased(ev *event.Event, d *event.CooldownReleasedData) error {
	if err := checkCooldown(d.Scope, d.Name); err != nil {
		return err
	}
	key := event.CooldownKey(d.Scope, d.Name)
	c := s.Cooldowns[key]
	// Only the release its current probe earned counts: a later limit
	// cleared the probe, and a released cooldown stays released.
	if c == nil || c.Released || c.Probe == "" || c.Probe != ev.Attempt {
		return nil
	}
	c.Released, c.ReleasedAt, c.ReleaseReason = true, ev.Time, clipText(d.Reason, maxCooldownCause)
	s.mark(keyCooldown + key)
	return nil
}

func checkCooldown(scope, name string) error {
	switch scope {
	case event.CooldownRuntime, event.CooldownModel, event.CooldownCredential:
	default:
		return fmt.Errorf("%w: cooldown with scope %.40q", event.ErrDecode, scope)
	}
	if name == "" || len(name) > maxCooldownName {
		return fmt.Errorf("%w: cooldown with a name of %d bytes", event.ErrDecode, len(name))
	}
	return nil
}

// probe makes a newly scheduled attempt the probe of the cooldowns it
// names whose probe slot is free: none yet, or one that ended without
// settling anything (withdrawn, cancelled, lost).
func (s *State) probe(a *Attempt, keys []string) {
	if len(keys) == 0 {
		return
	}
	a.Probe = keys
	for _, k := range keys {
		c := s.Cooldowns[k]
		if c == nil || c.Released {
			continue
		}
		if p := s.Attempts[c.Probe]; c.Probe == "" || p == nil || p.State.Terminal() {
			c.Probe = a.ID
			s.mark(keyCooldown + k)
		}
	}
}

// attemptWithdrawn ends an attempt the controller took back before any
// worker ran it; its task runs again at once (the decisions choose where),
// without the attempt counting against the task's attempts.
func (s *State) attemptWithdrawn(ev *event.Event, d *event.AttemptWithdrawnData) error {
	a, err := s.attempt(ev)
	if err != nil || a.State.Terminal() {
		return err
	}
	a.State, a.EndedAt, a.Phase = drovertype.AttemptWithdrawn, ev.Time, ev.Type
	a.Withdrawn = clipText(d.Reason, maxCooldownCause)
	s.touchAttempt(a)
	t := s.Task(a.Flow, a.Task)
	if t == nil || t.Attempt != a.ID || t.State.Terminal() {
		return nil
	}
	t.State = drovertype.TaskRetrying
	t.Retry = &PendingRetry{N: a.N + 1, Strategy: drovertype.StrategySameRuntime, Runtime: a.Runtime, Model: a.Model,
		DueAt: ev.Time, Reason: fmt.Sprintf("attempt %d withdrawn before it ran: %s", a.N, a.Withdrawn)}
	s.touchTask(t, ev)
	return nil
}

// taskWaiting records why a task ready to start its next attempt waits, or
// (no cooldowns) that it waits for them no more.
func (s *State) taskWaiting(ev *event.Event, d *event.TaskWaitingData) error {
	if d.N < 1 || d.Seq < 1 {
		return fmt.Errorf("%w: task_waiting for attempt %d, wait %d", event.ErrDecode, d.N, d.Seq)
	}
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || t.State.Terminal() || d.Seq != t.Waits+1 || d.N != t.Attempts+1 {
		return nil
	}
	keys := d.Cooldowns
	if len(keys) > maxCooldownRuntimes {
		keys = keys[:maxCooldownRuntimes]
	}
	// Since is when the wait began: a new reason for the same attempt (the
	// cooldown ended, its probe runs) goes on with the same wait.
	since := ev.Time
	if prev := t.Waiting(); prev != nil && prev.N == d.N {
		since = prev.Since
	}
	t.Wait = &TaskWait{N: d.N, Cooldowns: keys, Until: d.Until, Reason: clipText(d.Reason, maxCooldownCause), Since: since}
	if len(keys) == 0 {
		t.Wait = nil // the wait is over, though the task has not started yet
	}
	t.Waits = d.Seq
	s.touchTask(t, ev)
	return nil
}

// CooldownsFor returns the unreleased cooldowns that hold back an attempt
// on runtime asking for model, in key order.
func (s *State) CooldownsFor(runtime, model string) []*Cooldown {
	var out []*Cooldown
	for _, c := range s.Cooldowns {
		if !c.Released && c.Applies(runtime, model) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Cooldown) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// clipText cuts s to at most n bytes, on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
