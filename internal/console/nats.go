package console

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/objstore"
	"github.com/drover-dev/drover/internal/queue"
)

// NATS reads artifacts, output, events, the fleet and dead letters from
// JetStream. It implements Artifacts, Fleet and DeadLetters.
type NATS struct{ js jetstream.JetStream }

// NewNATS reads through js.
func NewNATS(js jetstream.JetStream) *NATS { return &NATS{js: js} }

var (
	_ Artifacts   = (*NATS)(nil)
	_ Fleet       = (*NATS)(nil)
	_ DeadLetters = (*NATS)(nil)
)

// Object opens an artifact of the artifacts store.
func (n *NATS) Object(ctx context.Context, name string) (io.ReadCloser, error) {
	return objstore.NewArtifacts(n.js).Get(ctx, name)
}

// Output follows the attempt's subject of the OUTPUT stream.
func (n *NATS) Output(ctx context.Context, flowID, attempt string) (OutputStream, error) {
	cons, err := n.js.OrderedConsumer(ctx, queue.OutputStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.OutputSubject(flowID, attempt)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("console: output of %s: %w", attempt, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("console: output of %s: %w", attempt, err)
	}
	return &natsOutput{it: it}, nil
}

type natsOutput struct{ it jetstream.MessagesContext }

func (o *natsOutput) Next() (event.OutputChunkData, uint64, error) {
	for {
		msg, err := o.it.Next()
		if err != nil {
			return event.OutputChunkData{}, 0, err
		}
		var pending uint64
		if md, err := msg.Metadata(); err == nil {
			pending = md.NumPending
		}
		ev, err := event.Decode(msg.Data())
		if err != nil {
			continue // a stray message: the stream is best effort
		}
		var c event.OutputChunkData
		if ev.Payload(&c) != nil {
			continue
		}
		return c, pending, nil
	}
}

func (o *natsOutput) Stop() { o.it.Stop() }

// Events reads the EVENTS stream at each sequence.
func (n *NATS) Events(ctx context.Context, seqs []uint64) ([]StreamEvent, error) {
	s, err := n.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("console: events: %w", err)
	}
	var out []StreamEvent
	for _, seq := range seqs {
		msg, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("console: event at %d: %w", seq, err)
		}
		if ev, err := event.Decode(msg.Data); err == nil {
			out = append(out, StreamEvent{Seq: seq, Event: ev})
		}
	}
	return out, nil
}

// Workers lists the registrations.
func (n *NATS) Workers(ctx context.Context) ([]*fleet.Registration, error) {
	return fleet.Workers(ctx, n.js)
}

// WatchWorkers watches the registry's bucket.
func (n *NATS) WatchWorkers(ctx context.Context) (<-chan struct{}, error) {
	kv, err := n.js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		return nil, fmt.Errorf("console: workers: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, fmt.Errorf("console: workers: %w", err)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Updates():
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

// DeadLetters reads the last limit dead letters, oldest first.
func (n *NATS) DeadLetters(ctx context.Context, limit int) ([]queue.DeadLetter, error) {
	return queue.ReadDeadLetters(ctx, n.js, limit)
}

// WatchDeadLetters follows the dead-letter stream from now on.
func (n *NATS) WatchDeadLetters(ctx context.Context) (<-chan queue.DeadLetter, error) {
	cons, err := n.js.OrderedConsumer(ctx, queue.DeadLetterStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("console: dead letters: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("console: dead letters: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	out := make(chan queue.DeadLetter, 16)
	go func() {
		defer stop()
		defer close(out)
		for {
			msg, err := it.Next()
			if err != nil {
				return
			}
			md, err := msg.Metadata()
			if err != nil {
				continue
			}
			select {
			case out <- queue.DeadLetterOf(msg, md):
			case <-ctx.Done():
				it.Stop()
				return
			}
		}
	}()
	return out, nil
}
