package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Batch publishes events and jobs without waiting for each acknowledgement
// before the next publish, then waits for them all. The controller's
// decisions of one round are independent of each other; published one
// acknowledged round trip at a time, a 10,000-task flow's first decisions
// kept the workers waiting for seconds. Messages leave in the order they
// are added, on one connection, and are stored in that order; each keeps
// its Nats-Msg-Id, so one that failed is deduplicated when the next round
// publishes it again. Its events are decisions, made from the projection
// as folded up to Folded: one the server answers "duplicate" is checked as
// PublishDecision checks it. A Batch is not safe for concurrent use.
type Batch struct {
	// Folded is the last sequence of the EVENTS stream folded into the
	// projection the batch's decisions were made from.
	Folded  uint64
	js      jetstream.JetStream
	epoch   uint64 // the leader epoch stamped on what it publishes
	pending []pendingPublish
	errs    []error
}

type pendingPublish struct {
	ack  jetstream.PubAckFuture
	ev   *event.Event // a decision, checked when the server has its id already
	msg  *nats.Msg
	end  func(*jetstream.PubAck, error) // the publish span's
	what string
	done func() // after the acknowledgement, if set
}

// batchWindow bounds the publishes awaiting acknowledgement.
const batchWindow = 256

// batchAckWait bounds the wait for one window's acknowledgements.
const batchAckWait = 10 * time.Second

// NewBatch starts a batch on js.
func NewBatch(js jetstream.JetStream) *Batch { return &Batch{js: js} }

// NewLeaderBatch starts a batch of a leader's decisions: each event and job
// it publishes carries the leader's epoch, by which the fold and the
// workers refuse what a leader publishes after its term.
func NewLeaderBatch(js jetstream.JetStream, epoch uint64) *Batch { return &Batch{js: js, epoch: epoch} }

// Event adds an event (see PublishEvent), stamped with the batch's leader
// epoch.
func (b *Batch) Event(ctx context.Context, ev *event.Event) {
	if b.epoch != 0 {
		ev.LeaderEpoch = b.epoch
	}
	b.event(ctx, ev, true)
}

// Observed adds an event a worker observed (see PublishEvent), not a
// decision: a copy the server holds under its id already is this event,
// published before.
func (b *Batch) Observed(ctx context.Context, ev *event.Event) { b.event(ctx, ev, false) }

// event adds ev; a decision's duplicate is checked when acknowledged.
func (b *Batch) event(ctx context.Context, ev *event.Event, decision bool) {
	msg, describe, err := eventMsg(ev)
	if err != nil {
		b.errs = append(b.errs, err)
		return
	}
	_, end := tracePublish(ctx, msg, describe)
	ack, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(eventMsgID(ev)), jetstream.WithExpectStream(EventsStream))
	p := pendingPublish{what: "event " + ev.ID}
	if decision {
		p.ev, p.msg = ev, msg
	}
	b.add(ctx, ack, err, end, p)
}

// Job adds a job (see PublishJob), stamped with the batch's leader epoch;
// done runs once the server has stored it.
func (b *Batch) Job(ctx context.Context, j *Job, done func()) {
	msg, err := jobMsg(ctx, b.js, j)
	if err != nil {
		b.errs = append(b.errs, err)
		return
	}
	stampEpoch(msg, b.epoch)
	_, end := tracePublish(ctx, msg, jobSpan(j, msg))
	ack, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(msgID(j.Attempt, b.epoch)), jetstream.WithExpectStream(AttemptsStream))
	b.add(ctx, ack, err, end, pendingPublish{what: "job " + j.Attempt, done: done})
}

// add keeps p, the publish of what, until its acknowledgement.
func (b *Batch) add(ctx context.Context, ack jetstream.PubAckFuture, err error, end func(*jetstream.PubAck, error), p pendingPublish) {
	if err != nil {
		end(nil, err)
		b.errs = append(b.errs, fmt.Errorf("queue: publish %s: %w", p.what, err))
		return
	}
	p.ack, p.end = ack, end
	b.pending = append(b.pending, p)
	if len(b.pending) >= batchWindow {
		b.await(ctx)
	}
}

// Wait waits for every acknowledgement and returns the publishes that
// failed, joined.
func (b *Batch) Wait(ctx context.Context) error {
	b.await(ctx)
	err := errors.Join(b.errs...)
	b.errs = nil
	return err
}

func (b *Batch) await(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, batchAckWait)
	defer cancel()
	for _, p := range b.pending {
		select {
		case ack := <-p.ack.Ok():
			p.end(ack, nil)
			if p.ev != nil && ack.Duplicate {
				d := decision{js: b.js, msg: p.msg, ev: p.ev, folded: b.Folded}
				if _, err := d.reclaim(ctx, ack); err != nil {
					b.errs = append(b.errs, err)
					continue
				}
			}
			if p.done != nil {
				p.done()
			}
		case err := <-p.ack.Err():
			p.end(nil, err)
			b.errs = append(b.errs, fmt.Errorf("queue: publish %s: %w", p.what, err))
		case <-ctx.Done():
			p.end(nil, ctx.Err())
			b.errs = append(b.errs, fmt.Errorf("queue: publish %s: %w", p.what, ctx.Err()))
		}
	}
	b.pending = b.pending[:0]
}
