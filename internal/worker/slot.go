package worker

import "sync"

// slot is one attempt's hold on a worker slot. A slot is an attempt using
// the machine: its CLI, its checks. What an attempt does once they have
// ended — push its branch, store its artifacts, emit its report, park its
// checkout — waits on the remote, the event store and the disk, and with a
// real forge the push alone takes seconds: the attempt gives its slot back
// then (finish) and holds one of the worker's finishing places instead, so
// the next job's CLI starts while this one's result travels. There are as
// many finishing places as slots, so a worker holds at most twice its
// slots in attempts and checkouts; with every place taken, an attempt
// keeps its slot to the end.
type slot struct {
	slots, finishing chan struct{}

	mu       sync.Mutex
	held     bool // the slot is still this attempt's
	finisher bool // it holds a finishing place
}

// takenSlot is the hold of an attempt whose claim loop just took a slot
// for it.
func (w *Worker) takenSlot() *slot {
	return &slot{slots: w.slots, finishing: w.finishing, held: true}
}

// finish gives the slot back for a finishing place, if one is free.
func (s *slot) finish() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		return
	}
	select {
	case s.finishing <- struct{}{}:
		s.finisher, s.held = true, false
		<-s.slots
	default:
	}
}

// release gives back what the attempt holds, at its end.
func (s *slot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		<-s.slots
		s.held = false
	}
	if s.finisher {
		<-s.finishing
		s.finisher = false
	}
}
