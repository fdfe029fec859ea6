package fleetsim

import (
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
)

// watch follows the submissions and completions of the simulated flows as
// they are stored (core NATS subscriptions to their subjects: JetStream
// delivers each stored message there too). A completion it misses (a slow
// consumer) is found by asking the controller (sim.statusDone).
type watch struct {
	mu        sync.Mutex
	completed map[string]event.FlowCompletedData // by flow id
	submitted map[string][]string                // flow ids by flow name
	kick      chan struct{}
	subs      []*nats.Subscription
}

// newWatch subscribes to the flows' submissions and completions.
func newWatch(nc *nats.Conn) (*watch, error) {
	w := &watch{completed: map[string]event.FlowCompletedData{}, submitted: map[string][]string{}, kick: make(chan struct{}, 1)}
	for _, typ := range []event.Type{event.FlowCompleted, event.FlowSubmitted} {
		sub, err := nc.Subscribe(queue.EventSubject("*", string(typ)), w.on)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("fleetsim: watch events: %w", err)
		}
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
	ev, err := event.Decode(m.Data)
	if err != nil {
		return
	}
	switch ev.Type {
	case event.FlowCompleted:
		var d event.FlowCompletedData
		if ev.Payload(&d) != nil {
			return
		}
		w.mu.Lock()
		w.completed[ev.Flow] = d
		w.mu.Unlock()
	case event.FlowSubmitted:
		var d event.FlowSubmittedData
		if ev.Payload(&d) != nil {
			return
		}
		w.mu.Lock()
		if !slices.Contains(w.submitted[d.Spec.Name], ev.Flow) {
			w.submitted[d.Spec.Name] = append(w.submitted[d.Spec.Name], ev.Flow)
		}
		w.mu.Unlock()
	default:
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// submittedAs returns the ids the flow named name was stored under.
func (w *watch) submittedAs(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.submitted[name])
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
