package fleetsim

import (
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
)

// watch follows the completions of the simulated flows as they are
// stored (a core NATS subscription to their subject: JetStream delivers
// each stored message there too). A completion it misses (a slow consumer)
// is found by asking the controller (sim.statusDone).
type watch struct {
	mu        sync.Mutex
	completed map[string]event.FlowCompletedData // by flow id
	kick      chan struct{}
	subs      []*nats.Subscription
}

// newWatch subscribes to the flows' completions.
func newWatch(nc *nats.Conn) (*watch, error) {
	w := &watch{completed: map[string]event.FlowCompletedData{}, kick: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(queue.EventSubject("*", string(event.FlowCompleted)), w.on)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: watch events: %w", err)
	}
	w.subs = append(w.subs, sub)
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
	if err != nil || ev.Type != event.FlowCompleted {
		return
	}
	var d event.FlowCompletedData
	if ev.Payload(&d) != nil {
		return
	}
	w.mu.Lock()
	w.completed[ev.Flow] = d
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
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
