package projection

import (
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Leadership is the latest leader_elected folded: whose term the log is in,
// and so the epoch every controller decision must carry from there on.
// Fencing lives here, in the log, not in clocks: a decision of an older
// epoch than the latest election is ignored wherever it lands after that
// election, so a leader that was paused or cut off and wakes up can publish
// nothing that takes effect (docs/design.md#leadership-and-fencing).
type Leadership struct {
	Epoch      uint64    `json:"epoch"`
	Controller string    `json:"controller"`
	Seq        uint64    `json:"seq"` // the stream sequence of the election
	At         time.Time `json:"at"`
	// Fenced counts the decisions of older epochs ignored, in all terms.
	Fenced int `json:"fenced,omitempty"`
}

// keyLeadership holds State.Leadership.
const keyLeadership = "n/leadership"

// LeaderEpoch is the epoch of the latest election folded; 0 before any
// (a log written before controllers elected a leader).
func (s *State) LeaderEpoch() uint64 {
	if s.Leadership == nil {
		return 0
	}
	return s.Leadership.Epoch
}

// fenced judges a controller decision by the leader epoch it carries
// against the latest election: an older one is stale (true, counted, and
// its id not seen, so the same decision made by the leader of the day is
// folded when it comes); a newer one is an epoch no election has opened
// yet, which no leader writes: a leader publishes its election and folds it
// before it decides anything. A decision without an epoch is of epoch 0:
// the log's own before its first election, stale after it.
func (s *State) fenced(ev *event.Event) (bool, error) {
	cur := s.LeaderEpoch()
	switch {
	case ev.LeaderEpoch < cur:
		s.Leadership.Fenced++
		s.mark(keyLeadership)
		return true, nil
	case ev.LeaderEpoch > cur:
		return false, contradiction("%s of leader epoch %d, which no election has opened (the latest is %d)", ev.Type, ev.LeaderEpoch, cur)
	}
	return false, nil
}

// leaderElected opens a term: the next epoch, never another. A controller
// appends its election on condition that the leadership subject ends where
// it last read it, so honest elections follow each other one epoch at a
// time; an election that skips epochs, or goes back, is written by no
// controller.
func (s *State) leaderElected(ev *event.Event, d *event.LeaderElectedData) error {
	if err := drovertype.ValidID(d.Controller); err != nil {
		return malformed("leader_elected: controller: %v", err)
	}
	if want := s.LeaderEpoch() + 1; ev.LeaderEpoch != want {
		return contradiction("leader_elected of epoch %d after epoch %d: elections open the next epoch", ev.LeaderEpoch, want-1)
	}
	fenced := 0
	if s.Leadership != nil {
		fenced = s.Leadership.Fenced
	}
	s.Leadership = &Leadership{Epoch: ev.LeaderEpoch, Controller: d.Controller, Seq: s.seq, At: ev.Time, Fenced: fenced}
	s.mark(keyLeadership)
	return nil
}
