package fleetsim

import (
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
)

// watch follows the events of the simulated flows as they are stored (a
// core NATS subscription to their subjects: JetStream delivers each stored
// message there too), on this process's monotonic clock: when each flow
// completes, and how long each attempt waited to be claimed.
//
// The wait of a claim is measured from the later of two instants: the
// attempt's scheduling, and the earliest moment a slot of the fleet was
// free and not yet taken by an earlier claim (slots free when an attempt
// or build is reported). So an attempt queued behind a busy fleet counts
// from when capacity came free for it, not from its scheduling: the
// figure is the controller's and the queue's latency, not the backlog's.
type watch struct {
	mu        sync.Mutex
	scheduled map[string]time.Time // by attempt
	free      timeHeap             // slot-free instants not yet taken
	claimedBy map[string]bool      // attempts whose claim was counted
	waits     []time.Duration
	completed map[string]event.FlowCompletedData // by flow id
	kick      chan struct{}
	subs      []*nats.Subscription
}

// watched are the event types watch reads.
var watchedTypes = []event.Type{event.AttemptScheduled, event.AttemptClaimed, event.AttemptReported,
	event.FlowIntegrated, event.FlowCompleted}

// newWatch subscribes to the events; slots is the fleet's, all free now.
func newWatch(nc *nats.Conn, slots int) (*watch, error) {
	w := &watch{scheduled: map[string]time.Time{}, claimedBy: map[string]bool{},
		completed: map[string]event.FlowCompletedData{}, kick: make(chan struct{}, 1)}
	now := time.Now()
	for range slots {
		w.free = append(w.free, now)
	}
	for _, typ := range watchedTypes {
		sub, err := nc.Subscribe(queue.EventSubject("*", string(typ)), w.on)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("fleetsim: watch events: %w", err)
		}
		// A large fleet's events come faster than one callback at a
		// time may take them in bursts; drop none for want of room.
		_ = sub.SetPendingLimits(-1, -1)
		w.subs = append(w.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		w.stop()
		return nil, fmt.Errorf("fleetsim: watch events: %w", err)
	}
	return w, nil
}

func (w *watch) stop() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
}

func (w *watch) on(m *nats.Msg) {
	at := time.Now()
	ev, err := event.Decode(m.Data)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case event.AttemptScheduled:
		if _, ok := w.scheduled[ev.Attempt]; !ok {
			w.scheduled[ev.Attempt] = at
		}
	case event.AttemptClaimed:
		w.claimed(ev, at)
	case event.AttemptReported, event.FlowIntegrated:
		heap.Push(&w.free, at)
	case event.FlowCompleted:
		var d event.FlowCompletedData
		if ev.Payload(&d) == nil {
			w.completed[ev.Flow] = d
		}
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// claimed takes a free slot for the claim and counts its wait. A claim of
// an integration build has no scheduling of its own and is not counted,
// but takes its slot.
func (w *watch) claimed(ev *event.Event, at time.Time) {
	if w.claimedBy[ev.Attempt+fmt.Sprint(ev.Epoch)] {
		return
	}
	w.claimedBy[ev.Attempt+fmt.Sprint(ev.Epoch)] = true
	if len(w.free) == 0 {
		return // a report not seen yet; the counts catch up
	}
	free := heap.Pop(&w.free).(time.Time)
	s, ok := w.scheduled[ev.Attempt]
	if ev.Task == "" || !ok {
		return
	}
	from := s
	if free.After(from) {
		from = free
	}
	w.waits = append(w.waits, at.Sub(from))
}

// done returns the flows of ids that have completed.
func (w *watch) done(ids []string) map[string]event.FlowCompletedData {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]event.FlowCompletedData{}
	for _, id := range ids {
		if d, ok := w.completed[id]; ok {
			out[id] = d
		}
	}
	return out
}

// claimWait returns the p-th percentile (0..100) of the claims' waits, and
// how many were counted.
func (w *watch) claimWait(p float64) (time.Duration, int) {
	w.mu.Lock()
	waits := slices.Clone(w.waits)
	w.mu.Unlock()
	if len(waits) == 0 {
		return 0, 0
	}
	slices.Sort(waits)
	i := int(float64(len(waits))*p/100+0.999999) - 1
	return waits[max(min(i, len(waits)-1), 0)], len(waits)
}

// timeHeap is a min-heap of instants.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
