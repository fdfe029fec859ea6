package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// A decision's id is derived from what it decides (drovertype.EventID), so
// whoever may publish on drover.events.* can store a message under its
// Nats-Msg-Id first. The fold parks such a message as poison, but the
// server would drop the real decision as a duplicate for its dedup window
// (10 minutes), and the flow would wait that long. So a decision's publish
// that the server answers "duplicate" is checked: the message stored under
// the id (the acknowledgement names its sequence) must be this decision,
// stored after what the decision was decided from. If it is not, the
// decision is published again at once under ImpostorID(id, that sequence),
// deterministic so that a decision made again (the next round, after a
// restart) finds its copy there; the fold counts it once, by its event id,
// which a poison message does not take.
//
// A message stored at or before the last sequence folded into the
// projection a decision was made from is never that decision, whatever its
// bytes: the fold has judged it already, and had it folded it as the
// decision, the controller would not make it again. A copy of the very
// decision a forger stored before the flow got there is poison, so it is
// stepped over too.

// maxImpostors bounds the messages of other writers one publish of a
// decision steps over, each under the id the one before points to.
const maxImpostors = 16

// ErrImpostors means the ids of a decision are all taken by messages of
// other writers, maxImpostors of them in a row.
var ErrImpostors = errors.New("queue: a decision's ids are taken by other writers' messages")

// ImpostorID is the Nats-Msg-Id a decision with event id id takes when
// the Nats-Msg-Id it tried last holds another writer's message, stored at
// seq: id#seq.
func ImpostorID(id string, seq uint64) string {
	return id + "#" + strconv.FormatUint(seq, 10)
}

// PublishDecision stores ev, a decision of the controller made from the
// projection as folded up to the sequence folded, as PublishEvent does, and
// makes sure that what the server holds under its id is ev (see above): it
// returns the sequence of ev's stored copy.
func PublishDecision(ctx context.Context, js jetstream.JetStream, ev *event.Event, folded uint64) (uint64, error) {
	msg, describe, err := eventMsg(ev)
	if err != nil {
		return 0, err
	}
	pctx, end := tracePublish(ctx, msg, describe)
	ack, err := js.PublishMsg(pctx, msg, jetstream.WithMsgID(eventMsgID(ev)), jetstream.WithExpectStream(EventsStream))
	end(ack, err)
	if err != nil {
		return 0, fmt.Errorf("queue: publish event %s: %w", ev.ID, err)
	}
	d := decision{js: js, msg: msg, ev: ev, folded: folded}
	if ack, err = d.reclaim(ctx, ack); err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// decision is a decision published, as a message, and what it was decided
// from.
type decision struct {
	js     jetstream.JetStream
	msg    *nats.Msg
	ev     *event.Event
	folded uint64
	stream jetstream.Stream // the EVENTS stream, once read
}

// reclaim checks the acknowledgement of d's publish: a duplicate must be d
// itself, or d is published again under the impostor's id. It returns the
// acknowledgement of d's stored copy.
func (d *decision) reclaim(ctx context.Context, ack *jetstream.PubAck) (*jetstream.PubAck, error) {
	for hops := 0; ack.Duplicate; hops++ {
		ours, err := d.storedAt(ctx, ack.Sequence)
		if err != nil || ours {
			return ack, err
		}
		if hops == maxImpostors {
			return nil, fmt.Errorf("%w: %s, %d in a row", ErrImpostors, d.ev.ID, hops+1)
		}
		id := ImpostorID(eventMsgID(d.ev), ack.Sequence)
		if ack, err = d.js.PublishMsg(ctx, d.msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(EventsStream)); err != nil {
			return nil, fmt.Errorf("queue: publish event %s again as %s: %w", d.ev.ID, id, err)
		}
	}
	return ack, nil
}

// storedAt reports whether the message at seq, which holds d's id, is d.
func (d *decision) storedAt(ctx context.Context, seq uint64) (bool, error) {
	if seq <= d.folded {
		return false, nil // judged by the fold before d was decided
	}
	if d.stream == nil {
		s, err := d.js.Stream(ctx, EventsStream)
		if err != nil {
			return false, fmt.Errorf("queue: decision %s: read what its id holds: %w", d.ev.ID, err)
		}
		d.stream = s
	}
	stored, err := d.stream.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil // deleted: whatever it was, d is not stored
	case err != nil:
		return false, fmt.Errorf("queue: decision %s: read what its id holds at %d: %w", d.ev.ID, seq, err)
	}
	return sameDecision(stored, d.msg, d.ev), nil
}

// sameDecision reports whether stored is ev as the controller would have
// stored it at the time stored says: the same subject and the same bytes,
// but for the envelope's time, which a decision made again is stamped with
// anew.
func sameDecision(stored *jetstream.RawStreamMsg, msg *nats.Msg, ev *event.Event) bool {
	if stored.Subject != msg.Subject {
		return false
	}
	if bytes.Equal(stored.Data, msg.Data) {
		return true
	}
	then, err := event.Decode(stored.Data)
	if err != nil {
		return false
	}
	at := *ev
	at.Time = then.Time
	data, err := at.Encode()
	return err == nil && bytes.Equal(data, stored.Data)
}
