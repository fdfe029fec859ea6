package queue

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog"
)

// PublishEvent stores ev on the EVENTS stream and returns its sequence. The
// event id is the Nats-Msg-Id, so a republish inside the dedup window is
// dropped by the server; outside it, the fold's own dedup by id applies.
func PublishEvent(ctx context.Context, js jetstream.JetStream, ev *eventlog.Event) (uint64, error) {
	data, err := ev.Encode()
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: EventSubject(ev.Flow, string(ev.Type)), Data: data, Header: nats.Header{}}
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(EventsStream))
	if err != nil {
		return 0, fmt.Errorf("queue: publish event %s: %w", ev.ID, err)
	}
	return ack.Sequence, nil
}

// PublishDeadLetter parks a poison message with the reason it was refused.
func PublishDeadLetter(ctx context.Context, js jetstream.JetStream, source, reason string, data []byte) error {
	const keep = 1 << 20
	if len(data) > keep {
		data = data[:keep]
	}
	msg := &nats.Msg{Subject: DeadLetterSubject(source), Data: data, Header: nats.Header{}}
	msg.Header.Set("Drover-Reason", reason)
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithExpectStream(DeadLetterStream)); err != nil {
		return fmt.Errorf("queue: park dead letter from %s: %w", source, err)
	}
	return nil
}

const DeadLetterSizeHeader = "Drover-Size"
