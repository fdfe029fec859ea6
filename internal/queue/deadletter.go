package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetter is one message parked on the dead-letter stream.
type DeadLetter struct {
	Seq    uint64
	Time   time.Time
	Source string // the last token of its subject: events, attempts, ...
	Reason string
	Size   int    // bytes of the original message
	Data   []byte // what was kept of it (a huge message is cut)
}

// ReadDeadLetters reads the last limit messages of the dead-letter stream,
// oldest first.
func ReadDeadLetters(ctx context.Context, js jetstream.JetStream, limit int) ([]DeadLetter, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	if info.State.Msgs == 0 || limit <= 0 {
		return nil, nil
	}
	start := info.State.FirstSeq
	if info.State.Msgs > uint64(limit) {
		start = info.State.LastSeq - uint64(limit) + 1
	}
	cons, err := js.OrderedConsumer(ctx, DeadLetterStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	var out []DeadLetter
	for len(out) < limit {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
		}
		out = append(out, DeadLetterOf(msg, md))
		if md.NumPending == 0 {
			break
		}
	}
	return out, nil
}

// DeadLetterOf reads a message of the dead-letter stream.
func DeadLetterOf(msg jetstream.Msg, md *jetstream.MsgMetadata) DeadLetter {
	size, _ := strconv.Atoi(msg.Headers().Get(DeadLetterSizeHeader))
	return DeadLetter{
		Seq: md.Sequence.Stream, Time: md.Timestamp, Source: strings.TrimPrefix(msg.Subject(), DeadLetterSubject("")),
		Reason: msg.Headers().Get(DeadLetterReasonHeader), Size: size, Data: msg.Data(),
	}
}
