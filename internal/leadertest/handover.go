package leadertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
)

// LastElection is the stream sequence and the epoch of the last election
// in the log; 0, 0 before any.
func LastElection(ctx context.Context, js jetstream.JetStream) (seq, epoch uint64, err error) {
	s, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return 0, 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, event.Subject(event.LeadershipFlow, event.LeaderElected))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	ev, err := event.Decode(m.Data)
	if err != nil {
		return 0, 0, err
	}
	return m.Sequence, ev.LeaderEpoch, nil
}

// StreamLast is the events stream's last sequence.
func StreamLast(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	s, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Handover is what a handover took, from when the old leader stopped (t0):
// the new leader's election in the log, and its first decision (an event
// it stamped with its epoch, its election aside). Times are the stream's.
type Handover struct {
	Leader           string
	Epoch            uint64
	Elected, Decided time.Duration
}

func (h Handover) String() string {
	return fmt.Sprintf("%s leads epoch %d: elected after %s, first decision after %s", h.Leader, h.Epoch,
		h.Elected.Round(time.Millisecond), h.Decided.Round(time.Millisecond))
}

// Measure reads the log after seq (where the stream ended when the leader
// of epoch before stopped, at t0) up to the first decision of a later
// leader, waiting for each event up to wait.
func Measure(ctx context.Context, js jetstream.JetStream, seq, before uint64, t0 time.Time, wait time.Duration) (Handover, error) {
	cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq + 1,
	})
	if err != nil {
		return Handover{}, err
	}
	var h Handover
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			return h, fmt.Errorf("leadertest: no decision of a leader after epoch %d (%v): %w", before, h, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return h, err
		}
		ev, err := event.Decode(msg.Data())
		switch {
		case err != nil || ev.LeaderEpoch <= before:
		case ev.Type == event.LeaderElected:
			var d event.LeaderElectedData
			_ = ev.Payload(&d)
			h.Leader, h.Epoch, h.Elected = d.Controller, ev.LeaderEpoch, md.Timestamp.Sub(t0)
		case ev.LeaderEpoch == h.Epoch:
			h.Decided = md.Timestamp.Sub(t0)
			return h, nil
		}
	}
}

// Percentiles is the median and the maximum of ds (zero when empty).
func Percentiles(ds []time.Duration) (p50, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}
