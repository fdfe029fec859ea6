package controller

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
)

// lostAcks is JetStream whose next lose publishes on subject are stored
// but answer as if the acknowledgement never came, as a busy server's can.
type lostAcks struct {
	jetstream.JetStream
	subject string
	lose    atomic.Int32
}

func (j *lostAcks) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(ctx, msg, opts...)
	if err == nil && msg.Subject == j.subject && j.lose.Add(-1) >= 0 {
		return nil, context.DeadlineExceeded
	}
	return ack, err
}

// TestWriteAsksAgainForALostAck: an operator's write whose acknowledgement
// did not come is asked for again, and answers with the sequence of the
// one message stored; past writeAttempts lost answers it fails.
func TestWriteAsksAgainForALostAck(t *testing.T) {
	h := newHarness(t)
	subject := queue.EventSubject("f-1", string(event.BudgetSet))
	lost := &lostAcks{JetStream: h.js, subject: subject}
	h.setup = func(c *Controller) { c.js = lost }
	h.start(filepath.Join(t.TempDir(), "state"))
	waitCond(t, "the controller to lead", h.leads)

	write := func(key string) (uint64, error) {
		ev, err := event.New(drovertype.EventID(event.BudgetSet, key), event.BudgetSet, time.Now(), "f-1", "", "", 0,
			event.BudgetSetData{})
		if err != nil {
			t.Fatal(err)
		}
		return h.ctrl.publishPatiently(context.Background(), ev)
	}
	lost.lose.Store(writeAttempts - 1)
	seq, err := write("k1")
	if err != nil || seq == 0 {
		t.Fatalf("a write whose first %d acks were lost: seq %d, %v", writeAttempts-1, seq, err)
	}
	s, err := h.js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != 1 {
		t.Errorf("%d messages stored for one write asked %d times, want 1", n, writeAttempts)
	}
	lost.lose.Store(writeAttempts)
	if _, err := write("k2"); err == nil {
		t.Errorf("a write none of whose %d acks came succeeded", writeAttempts)
	}
}
