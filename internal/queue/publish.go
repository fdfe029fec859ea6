package queue

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/tracing"
)

// PublishEvent stores ev on the EVENTS stream and returns its sequence. The
// event id is the Nats-Msg-Id (with the leader epoch of a decision, see
// msgID), so a republish inside the dedup window is dropped by the server;
// outside it, the fold's own dedup by id applies.
func PublishEvent(ctx context.Context, js jetstream.JetStream, ev *event.Event, opts ...jetstream.PublishOpt) (uint64, error) {
	msg, describe, err := eventMsg(ev)
	if err != nil {
		return 0, err
	}
	ctx, end := tracePublish(ctx, msg, describe)
	opts = append([]jetstream.PublishOpt{jetstream.WithMsgID(eventMsgID(ev)), jetstream.WithExpectStream(EventsStream)}, opts...)
	ack, err := js.PublishMsg(ctx, msg, opts...)
	end(ack, err)
	if err != nil {
		return 0, fmt.Errorf("queue: publish event %s: %w", ev.ID, err)
	}
	return ack.Sequence, nil
}

// eventMsg is ev as a message for the EVENTS stream, and how its publish
// span names it.
func eventMsg(ev *event.Event) (*nats.Msg, func() (tracing.Message, tracing.Owner), error) {
	if err := CheckEventIDs(ev); err != nil {
		return nil, nil, err
	}
	data, err := ev.Encode()
	if err != nil {
		return nil, nil, err
	}
	msg := &nats.Msg{Subject: EventSubject(ev.Flow, string(ev.Type)), Data: data, Header: nats.Header{}}
	return msg, func() (tracing.Message, tracing.Owner) {
		return tracing.Message{Template: EventsTemplate, Destination: EventDestination(string(ev.Type)), ID: ev.ID}, EventOwner(ev)
	}, nil
}

var eventTypeRE = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

// CheckEventIDs refuses an event whose ids could not be a subject token or
// a key: they come from flows and jobs, which come from users.
func CheckEventIDs(ev *event.Event) error {
	if err := drovertype.ValidID(ev.Flow); err != nil {
		return fmt.Errorf("queue: event %s: flow: %w", ev.ID, err)
	}
	if ev.Task != "" {
		if err := drovertype.ValidID(ev.Task); err != nil {
			return fmt.Errorf("queue: event %s: task: %w", ev.ID, err)
		}
	}
	if ev.Attempt != "" {
		if _, _, _, err := drovertype.ParseAttemptID(ev.Attempt); err != nil {
			return fmt.Errorf("queue: event %s: %w", ev.ID, err)
		}
	}
	if !eventTypeRE.MatchString(string(ev.Type)) {
		return fmt.Errorf("queue: event %s: %q is not an event type", ev.ID, ev.Type)
	}
	if ev.ID == "" || len(ev.ID) > drovertype.MaxEventIDLen {
		return fmt.Errorf("queue: event id of %d bytes", len(ev.ID))
	}
	return nil
}

// Dead letter headers.
const (
	// DeadLetterReasonHeader says why the message was refused.
	DeadLetterReasonHeader = "Drover-Reason"
	// DeadLetterSizeHeader is the size of the refused message, which the
	// stored copy may be a truncated prefix of.
	DeadLetterSizeHeader = "Drover-Original-Size"
)

const (
	deadLetterMaxMsgSize = 2 << 20 // the DEADLETTER stream's MaxMsgSize
	// deadLetterMaxBytes bounds the DEADLETTER stream, the oldest letters
	// going first: anyone who may publish on Drover's subjects can send
	// junk, and each piece of it is parked.
	deadLetterMaxBytes = 1 << 30
	maxReasonLen       = 4 << 10
	// headerRoom is kept for the header framing and the headers JetStream
	// adds (Nats-Expected-Stream).
	headerRoom = 512
)

// PublishDeadLetter parks a poison message with the reason it was refused.
// The message is cut to what the server accepts (its max_payload, 1 MiB by
// default, counts headers too), so even a message as large as anything the
// server delivers can be parked.
func PublishDeadLetter(ctx context.Context, js jetstream.JetStream, source, reason string, data []byte) error {
	reason = truncateUTF8(reason, maxReasonLen)
	limit := int64(deadLetterMaxMsgSize)
	if mp := js.Conn().MaxPayload(); mp > 0 && mp < limit {
		limit = mp
	}
	keep := max(limit-headerRoom-int64(len(reason)), 0)
	msg := &nats.Msg{Subject: DeadLetterSubject(source), Header: nats.Header{}}
	msg.Header.Set(DeadLetterReasonHeader, reason)
	msg.Header.Set(DeadLetterSizeHeader, strconv.Itoa(len(data)))
	if int64(len(data)) > keep {
		data = data[:keep]
	}
	msg.Data = data
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithExpectStream(DeadLetterStream)); err != nil {
		return fmt.Errorf("queue: park dead letter from %s: %w", source, err)
	}
	return nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
