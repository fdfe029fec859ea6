package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// Cooldowns: a rate limit an attempt meets is a fact about the fleet
// (docs/design.md#cooldowns). The decisions here record it for the runtime,
// the model and the credential; hold back, withdraw or move elsewhere the
// attempts it concerns; let one attempt probe it once it ends; and release
// it when that probe gets past the limit.

// cooling is one round's view of the cooldowns: the folded ones, with the
// cooldowns, probes and releases decided in the round laid over them (they
// are folded only when the events come back), so that a decision later in
// the round sees one made earlier.
type cooling struct {
	dc   *decider
	recs map[string]*projection.Cooldown // unreleased, by key
	// creds are the runtimes each credential fingerprint was reported
	// on, read from the attempts the first time a round needs them.
	creds map[string][]string
}

func newCooling(dc *decider) *cooling {
	cl := &cooling{dc: dc, recs: map[string]*projection.Cooldown{}}
	for k, c := range dc.st.Cooldowns {
		if !c.Released {
			cl.recs[k] = c
		}
	}
	return cl
}

// holdStatus is what the cooldowns say about an attempt.
type holdStatus int

const (
	holdFree    holdStatus = iota // no cooldown in its way
	holdProbe                     // every one in its way has ended and awaits a probe: it may be that probe
	holdCooling                   // one in its way has not ended
	holdProbing                   // one in its way awaits the outcome of another attempt, its probe
)

// hold is the cooldowns in the way of an attempt and what they say.
type hold struct {
	status holdStatus
	keys   []string  // every unreleased cooldown that applies, sorted
	until  time.Time // holdCooling: when the last of those cooling ends
	reason string
}

// check says whether an attempt on runtime asking for model may start;
// self is the attempt itself when it is already scheduled ("" otherwise).
func (cl *cooling) check(runtime, model, self string) hold {
	if len(cl.recs) == 0 {
		return hold{}
	}
	var h hold
	var cool, probing []*projection.Cooldown
	for _, k := range slices.Sorted(maps.Keys(cl.recs)) {
		c := cl.recs[k]
		if !c.Applies(runtime, model) {
			continue
		}
		h.keys = append(h.keys, k)
		switch {
		case c.Cooling(cl.dc.now):
			cool = append(cool, c)
			if c.Until.After(h.until) {
				h.until = c.Until
			}
		case cl.liveProbe(c) != "" && cl.liveProbe(c) != self:
			probing = append(probing, c)
		}
	}
	switch {
	case len(h.keys) == 0:
		return hold{}
	case len(cool) > 0:
		h.status = holdCooling
		parts := make([]string, len(cool))
		for i, c := range cool {
			parts[i] = fmt.Sprintf("%s is cooling down until %s (%s on %s: %s)", scopeName(c), stamp(c.Until), c.Class, c.Runtime, clip(c.Cause, 120))
		}
		h.reason = strings.Join(parts, "; ")
	case len(probing) > 0:
		h.status = holdProbing
		parts := make([]string, len(probing))
		for i, c := range probing {
			parts[i] = fmt.Sprintf("%s is probed by attempt %s", scopeName(c), cl.liveProbe(c))
		}
		h.reason = "waiting for the probe: " + strings.Join(parts, "; ")
	default:
		h.status = holdProbe
	}
	return h
}

// liveProbe is the attempt probing c that has not ended, or "".
func (cl *cooling) liveProbe(c *projection.Cooldown) string {
	if c.Probe == "" {
		return ""
	}
	if a := cl.dc.st.Attempts[c.Probe]; a != nil && a.State.Terminal() {
		return ""
	}
	return c.Probe // scheduled in this round, or not ended
}

// probe makes the attempt the probe of keys for the rest of the round; the
// fold of its attempt_scheduled does the same.
func (cl *cooling) probe(keys []string, attempt string) {
	for _, k := range keys {
		if c := cl.recs[k]; c != nil {
			n := *c
			n.Probe = attempt
			cl.recs[k] = &n
		}
	}
}

func scopeName(c *projection.Cooldown) string {
	if c.Scope == event.CooldownCredential {
		return fmt.Sprintf("credential %s (runtimes %s)", c.Name, strings.Join(c.Runtimes, ", "))
	}
	return c.Scope + " " + c.Name
}

// stamp prints a time for a reason: UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// limits records the cooldowns that the current attempts of running tasks
// call for, having met a rate limit (and of retrying ones, should their
// cooldown not have been recorded before the retry was).
func (dc *decider) limits() error {
	for _, r := range dc.flows {
		for _, t := range r.tasks {
			if t.State != drovertype.TaskRunning && t.State != drovertype.TaskRetrying {
				continue
			}
			if a := dc.st.Attempts[t.Attempt]; a != nil && a.State == drovertype.AttemptFailed {
				if err := dc.limited(a); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// limited records the cooldowns a task's failed attempt calls for when it
// met a rate limit: for its runtime, and for its model and credential when
// the report names them. Each is decided once per attempt and scope.
func (dc *decider) limited(a *projection.Attempt) error {
	info := a.Error
	if info == nil && a.Report != nil {
		info = a.Report.Error
	}
	if info == nil || info.Class != drovertype.ClassRateLimited {
		return nil
	}
	model := a.Model
	if model == "" && a.Report != nil && a.Report.Usage != nil {
		model = a.Report.Usage.Model
	}
	if len(model) > flow.MaxModelLen {
		model = "" // a name no flow can ask for
	}
	credential := ""
	if a.Report != nil {
		credential = a.Report.Credential
	}
	scopes := []struct{ scope, name string }{
		{event.CooldownRuntime, a.Runtime}, {event.CooldownModel, model}, {event.CooldownCredential, credential},
	}
	for _, s := range scopes {
		if s.name == "" {
			continue
		}
		id := drovertype.EventID(event.CooldownStarted, a.ID+":"+s.scope)
		if _, done := dc.st.Seen[id]; done {
			continue
		}
		d := dc.cooldownFor(a, info, s.scope, s.name)
		ev, err := event.New(id, event.CooldownStarted, dc.now, a.Flow, a.Task, a.ID, 0, d)
		if err != nil {
			return err
		}
		dc.out = append(dc.out, action{event: ev})
		key := event.CooldownKey(s.scope, s.name)
		dc.cool.recs[key] = dc.cool.recs[key].After(ev, &d)
	}
	return nil
}

// cooldownFor is the cooldown_started an attempt's limit calls for in one
// scope: how long (until the quota's reset time the CLI printed; else the
// wait it asked for, or the configured default, with backoff) and at which
// step. A limit met by an attempt that
// started after the cooldown began (its probe, or one that raced it) backs
// the cooldown off; one met by an attempt already running then keeps the
// step and may only push the end later.
func (dc *decider) cooldownFor(a *projection.Attempt, info *event.ErrorInfo, scope, name string) event.CooldownStartedData {
	end := a.EndedAt
	if end.IsZero() {
		end = a.ScheduledAt
	}
	stated, source := time.Duration(0), event.CooldownDefault
	switch {
	case info.ResetAt.After(end):
		stated, source = info.ResetAt.Sub(end), event.CooldownResetAt
	case info.RetryAfterMS > 0:
		stated, source = time.Duration(info.RetryAfterMS)*time.Millisecond, event.CooldownRetryAfter
	}
	step := 1
	c := dc.cool.recs[event.CooldownKey(scope, name)]
	if c != nil {
		step = c.Step
		if a.ID == c.Probe || !a.ScheduledAt.Before(c.StartedAt) {
			step++
		}
	}
	// A reset time is the provider's word: it is kept, with no backoff.
	backoff := step
	if source == event.CooldownResetAt {
		backoff = 1
	}
	d := event.CooldownStartedData{
		Scope: scope, Name: name, Runtime: a.Runtime, Step: step, From: end,
		Until: end.Add(dc.c.cfg.Cooldown.Wait(stated, backoff)), Source: source,
		Class: info.Class, Cause: clip(info.Message, 500),
	}
	if scope == event.CooldownCredential {
		d.Runtimes = dc.credentialRuntimes(name, a.Runtime)
	}
	if c == nil {
		d.InFlight = dc.inFlight(a, scope, name, d.Runtimes)
	}
	return d
}

// credentialRuntimes are the runtimes whose attempts reported credential,
// and runtime.
func (dc *decider) credentialRuntimes(credential, runtime string) []string {
	cl := dc.cool
	if cl.creds == nil {
		cl.creds = map[string][]string{}
		for _, a := range dc.st.Attempts {
			if r := a.Report; r != nil && r.Credential != "" && !slices.Contains(cl.creds[r.Credential], a.Runtime) {
				cl.creds[r.Credential] = append(cl.creds[r.Credential], a.Runtime)
			}
		}
	}
	out := slices.Clone(cl.creds[credential])
	if !slices.Contains(out, runtime) {
		out = append(out, runtime)
	}
	slices.Sort(out)
	return out
}

// inFlight counts the other attempts a worker runs in the scope: they were
// running when the limit arrived, and finish.
func (dc *decider) inFlight(limited *projection.Attempt, scope, name string, runtimes []string) int {
	probe := projection.Cooldown{Scope: scope, Name: name, Runtimes: runtimes}
	n := 0
	for _, r := range dc.flows {
		for _, t := range r.tasks {
			a := dc.liveAttempt(t)
			if a != nil && a.ID != limited.ID && a.State == drovertype.AttemptClaimed && probe.Applies(a.Runtime, a.Model) {
				n++
			}
		}
	}
	return n
}

// releases records the end of each cooldown whose probe got past the
// limit: it succeeded, or failed for a reason that is not a limit and came
// from the provider's side of the run. A probe that ended without saying
// anything about the limit (withdrawn, cancelled, lost, or failing before
// the CLI ran) leaves the slot to the next attempt.
func (dc *decider) releases() error {
	for _, k := range slices.Sorted(maps.Keys(dc.cool.recs)) {
		c := dc.cool.recs[k]
		p := dc.st.Attempts[c.Probe]
		if c.Probe == "" || p == nil || !settles(p) {
			continue
		}
		id := drovertype.EventID(event.CooldownReleased, p.ID+":"+c.Scope)
		if _, done := dc.st.Seen[id]; done {
			continue
		}
		reason := fmt.Sprintf("probe %s on %s succeeded", p.ID, p.Runtime)
		if p.State == drovertype.AttemptFailed {
			reason = fmt.Sprintf("probe %s on %s got past the limit (it failed otherwise: %s)", p.ID, p.Runtime, classOf(p))
		}
		ev, err := event.New(id, event.CooldownReleased, dc.now, p.Flow, p.Task, p.ID, 0,
			event.CooldownReleasedData{Scope: c.Scope, Name: c.Name, Reason: reason})
		if err != nil {
			return err
		}
		dc.out = append(dc.out, action{event: ev})
		delete(dc.cool.recs, k)
	}
	return nil
}

// settles reports whether a probe's end says the limit is gone.
func settles(p *projection.Attempt) bool {
	switch p.State {
	case drovertype.AttemptSucceeded:
		return true
	case drovertype.AttemptFailed:
		switch classOf(p) {
		case drovertype.ClassRateLimited, drovertype.ClassCancelled, drovertype.ClassWorkerLost, drovertype.ClassPrepareFailed,
			drovertype.ClassConnectionFailed, drovertype.ClassMergeConflict, drovertype.ClassUnknown, "":
			return false
		}
		return true
	}
	return false
}

func classOf(a *projection.Attempt) drovertype.ErrorClass {
	switch {
	case a.Error != nil:
		return a.Error.Class
	case a.Report != nil && a.Report.Error != nil:
		return a.Report.Error.Class
	}
	return ""
}

// start is where a task's next attempt can run now, given the cooldowns.
type start struct {
	runtime, model string
	args           []string
	probe          []string // the cooldowns it probes
	// wait is set when it cannot start anywhere: why, and until when.
	wait *hold
}

// where picks the runtime of a task's next attempt (retry nil: a new one):
// the first of its candidates no cooldown holds back, or whose cooldowns
// have all ended and await a probe. When every candidate is held back it
// returns why the first one is.
func (dc *decider) where(t *projection.Task, retry *projection.PendingRetry) start {
	if len(dc.cool.recs) == 0 {
		// The common case, and the walk of a large flow: nothing is held
		// back, the task runs where it would.
		if retry == nil {
			return start{} // schedule fills in the task's resolved runtime
		}
		c := candidates(t, retry)[0]
		return start{runtime: c.runtime, model: c.model, args: c.args}
	}
	cands := candidates(t, retry)
	var first *hold
	for _, c := range cands {
		h := dc.cool.check(c.runtime, c.model, "")
		switch h.status {
		case holdFree:
			return start{runtime: c.runtime, model: c.model, args: c.args}
		case holdProbe:
			return start{runtime: c.runtime, model: c.model, args: c.args, probe: h.keys}
		}
		if first == nil {
			first = &h
		}
	}
	if len(cands) > 1 {
		first.reason += " (and every fallback runtime of the task is held back)"
	}
	return start{wait: first}
}

// choice is a runtime a task's next attempt may run on.
type choice struct {
	runtime, model string
	args           []string
}

// candidates are the runtimes a task's next attempt may run on, in order:
// from the one it would run on (the primary for a new attempt, the retry's
// for a retry) along its chain of fallbacks. The primary's model and
// arguments go only to the primary; any other runs with its own default
// model, as the retry policy's fallback does (a retry keeps its model).
func candidates(t *projection.Task, retry *projection.PendingRetry) []choice {
	if t.Plan == nil {
		if retry != nil {
			return []choice{{runtime: retry.Runtime, model: retry.Model}}
		}
		return []choice{{runtime: t.Runtime}}
	}
	w := t.Plan.Worker
	chain := []string{w.Name}
	for _, r := range t.Plan.Retry.Fallback {
		if r != "" && !slices.Contains(chain, r) {
			chain = append(chain, r)
		}
	}
	from := 0
	if retry != nil {
		if i := slices.Index(chain, retry.Runtime); i >= 0 {
			from = i
		} else {
			chain = append([]string{retry.Runtime}, chain...)
		}
	}
	out := make([]choice, 0, len(chain)-from)
	for i, r := range chain[from:] {
		c := choice{runtime: r}
		switch {
		case retry != nil && i == 0:
			c.model = retry.Model
			if r == w.Name {
				c.args = w.Args
			}
		case r == w.Name:
			c.model, c.args = w.Model, w.Args
		}
		out = append(out, c)
	}
	return out
}

// waitFor records why a task that could start attempt n waits, unless it
// says so already; a hold without keys records that it waits for no
// cooldown now.
func (dc *decider) waitFor(f *projection.Flow, t *projection.Task, h *hold) error {
	n := t.Attempts + 1
	until := h.until
	if h.status != holdCooling {
		until = time.Time{}
	}
	w := t.Waiting()
	switch {
	case len(h.keys) == 0 && w == nil:
		return nil
	case w != nil && w.N == n && w.Reason == h.reason && w.Until.Equal(until) && slices.Equal(w.Cooldowns, h.keys):
		return nil
	}
	seq := t.Waits + 1
	return dc.add(fmt.Sprintf("%s/%s:%d", f.ID, t.ID, seq), event.TaskWaiting, f.ID, t.ID, "",
		event.TaskWaitingData{N: n, Seq: seq, Cooldowns: h.keys, Until: until, Reason: h.reason})
}

// withdrawable reports whether a queued attempt must be taken back before
// it runs: a cooldown in its way has not ended, or awaits another
// attempt's probe. (One in its way that has ended and has no probe lets it
// through: it was queued before, and runs first.)
func (dc *decider) withdrawable(a *projection.Attempt) (hold, bool) {
	h := dc.cool.check(a.Runtime, a.Model, a.ID)
	return h, h.status == holdCooling || h.status == holdProbing
}
