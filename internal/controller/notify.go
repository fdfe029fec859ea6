package controller

import "sync"

// foldNotifier tells subscribers that a fold was committed. Each
// subscriber has a channel of one: a burst of commits while it is busy is
// one wake-up, so a slow subscriber (a browser on a slow link) never holds
// the fold back and never queues more than one notice.
type foldNotifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (n *foldNotifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel that receives after folds are committed
// (one receive may stand for many folds) and a func that unsubscribes.
func (c *Controller) Subscribe() (<-chan struct{}, func()) {
	n := &c.notifier
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[chan struct{}]struct{}{}
	}
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}
