package fleetsim

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/worker"
)

// slotEvent is an event that takes or frees a worker's slot, or makes an
// attempt claimable, at the time its writer stamped on it (the
// simulation's processes share one host, so one clock).
type slotEvent struct {
	typ     event.Type
	at      time.Time
	attempt string
	build   bool // an integration build's claim
}

// slotEvents are the types claimWaits reads.
var slotEvents = []event.Type{event.AttemptScheduled, event.AttemptClaimed, event.AttemptReported, event.FlowIntegrated}

// slotEventOf reads the event of a message, when it is of a type
// claimWaits reads.
func slotEventOf(subject string, raw []byte) (slotEvent, bool) {
	typ := event.Type(subject[strings.LastIndexByte(subject, '.')+1:])
	if !slices.Contains(slotEvents, typ) {
		return slotEvent{}, false
	}
	ev, err := event.Decode(raw)
	if err != nil || ev.Type != typ {
		return slotEvent{}, false
	}
	return slotEvent{typ: typ, at: ev.Time, attempt: ev.Attempt, build: typ == event.AttemptClaimed && ev.Task == ""}, true
}

// ClaimWaits returns how long each attempt waited to be claimed, in
// order: from the later of its scheduling and the earliest moment a slot
// of the fleet was free and not taken by an earlier claim, to its claim.
// The fleet's slots are all free at up; a report (or a build) frees one.
// So an attempt queued behind a busy fleet counts from when capacity came
// free for it, not from its scheduling: the figure is the controller's
// and the queue's latency, not the backlog's. A build's claim takes a slot
// and is not counted.
func (l *Log) ClaimWaits(slots int, up time.Time) []time.Duration {
	evs := slices.Clone(l.claims)
	slices.SortStableFunc(evs, func(a, b slotEvent) int { return a.at.Compare(b.at) })
	free := make([]time.Time, slots, slots+len(evs)) // in time order, as evs are
	for i := range free {
		free[i] = up
	}
	scheduled := map[string]time.Time{}
	var waits []time.Duration
	for _, e := range evs {
		switch e.typ {
		case event.AttemptScheduled:
			scheduled[e.attempt] = e.at
		case event.AttemptReported, event.FlowIntegrated:
			free = append(free, e.at)
		case event.AttemptClaimed:
			if len(free) == 0 {
				continue // more claims than slots: a claim superseded, its report never came
			}
			slot := free[0]
			free = free[1:]
			s, ok := scheduled[e.attempt]
			if e.build || !ok {
				continue
			}
			if slot.After(s) {
				s = slot
			}
			waits = append(waits, e.at.Sub(s))
		}
	}
	slices.Sort(waits)
	return waits
}

// ClaimPart is one leg of the claims' waits, over the claims whose
// attempt's scheduling is in the log.
type ClaimPart struct {
	Name     string
	P50, P99 time.Duration
}

// ClaimParts splits the claims' waits at the job's storing and its
// delivery to a worker's fetch (times the workers reported: worker.
// WithClaimTimes): decided → stored is the controller's round, its
// publish and the store's fsync; stored → delivered the queue, backlog
// included; delivered → claimed the claim's write. Unlike ClaimWaits they
// count from the scheduling, whatever the fleet's slots were doing.
func (l *Log) ClaimParts(times []worker.ClaimTimes) []ClaimPart {
	scheduled := map[string]time.Time{}
	for _, e := range l.claims {
		if e.typ == event.AttemptScheduled {
			scheduled[e.attempt] = e.at
		}
	}
	var decided, stored, delivered []time.Duration
	for _, t := range times {
		s, ok := scheduled[t.Attempt]
		if !ok {
			continue // a build's, or one the log does not hold
		}
		decided = append(decided, t.Stored.Sub(s))
		stored = append(stored, t.Delivered.Sub(t.Stored))
		delivered = append(delivered, t.Claimed.Sub(t.Delivered))
	}
	parts := []ClaimPart{{Name: "decided→stored"}, {Name: "stored→delivered"}, {Name: "delivered→claimed"}}
	for i, d := range [][]time.Duration{decided, stored, delivered} {
		slices.Sort(d)
		parts[i].P50, parts[i].P99 = percentile(d, 50), percentile(d, 99)
	}
	return parts
}

// percentile is the p-th percentile (0..100) of sorted waits, by nearest
// rank; 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(min(i, len(sorted)-1), 0)]
}
