package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// decisionAt is the flow_completed decision of flow f, stamped at.
func decisionAt(t testing.TB, at time.Time) *event.Event {
	t.Helper()
	ev, err := event.New(drovertype.EventID(event.FlowCompleted, "f"), event.FlowCompleted, at, "f", "", "", 0,
		event.FlowCompletedData{State: drovertype.FlowSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// forge stores data on subject under the Nats-Msg-Id id, as anyone who may
// publish on drover.events.* can, and returns its sequence.
func forge(t testing.TB, js jetstream.JetStream, subject, id string, data []byte) uint64 {
	t.Helper()
	ack, err := js.PublishMsg(testCtx(t), &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Fatalf("forged %s: the id is taken already", id)
	}
	return ack.Sequence
}

// stored checks that the message at seq is ev, under the Nats-Msg-Id id.
func stored(t testing.TB, js jetstream.JetStream, seq uint64, ev *event.Event, id string) {
	t.Helper()
	m := getMsg(t, js, EventsStream, seq)
	want, _ := ev.Encode()
	if m.Subject != event.Subject(ev.Flow, ev.Type) || string(m.Data) != string(want) || m.Header.Get(jetstream.MsgIDHeader) != id {
		t.Errorf("#%d: %s %q under %q; want %s under %q", seq, m.Subject, m.Data, m.Header.Get(jetstream.MsgIDHeader), want, id)
	}
}

// A forgery stored first under a decision's id does not take its place:
// the decision is stored at once under the id the forgery's sequence
// names, and deciding it again (later, so stamped anew) finds it there.
func TestPublishDecisionStepsOverAForgery(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	now := time.Now()
	ev := decisionAt(t, now)
	subject := event.Subject("f", event.FlowCompleted)

	forged := forge(t, js, subject, ev.ID, []byte(`{"v":1,"id":"`+ev.ID+`","type":"flow_completed","flow":"f","data":{"state":"failed"}}`))
	seq, err := PublishDecision(ctx, js, ev, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seq == forged {
		t.Fatalf("the decision's publish reported the forgery's sequence %d", seq)
	}
	stored(t, js, seq, ev, ImpostorID(ev.ID, forged))

	for i, again := range []*event.Event{ev, decisionAt(t, now.Add(time.Second)), decisionAt(t, now.Add(time.Hour))} {
		got, err := PublishDecision(ctx, js, again, 0)
		if err != nil || got != seq {
			t.Errorf("decided again (%d): seq %d, %v; want %d", i, got, err, seq)
		}
	}
	if n := streamMsgs(t, js, EventsStream); n != 2 {
		t.Errorf("%d messages stored, want the forgery and the decision", n)
	}
}

// What another writer stored under a decision's id is the decision only
// when its bytes are the decision's at the time it says: anything else,
// however close, is stepped over; a chain of forgeries under the ids each
// points to is stepped over too, up to maxImpostors.
func TestPublishDecisionChecksWhatItsIDHolds(t *testing.T) {
	t.Parallel()
	ev := decisionAt(t, time.Now())
	data, _ := ev.Encode()
	earlier := decisionAt(t, ev.Time.Add(-time.Minute))
	early, _ := earlier.Encode()
	other := *ev
	other.Data = []byte(`{"state":"failed"}`)
	otherData, _ := other.Encode()
	subject := event.Subject("f", event.FlowCompleted)
	for _, tc := range []struct {
		name    string
		subject string
		data    []byte
		ours    bool
	}{
		{"the same bytes", subject, data, true},
		{"the same decision stamped earlier", subject, early, true},
		{"another payload", subject, otherData, false},
		{"the same bytes on another subject", event.Subject("g", event.FlowCompleted), data, false},
		{"the same bytes with a blank more", subject, append(append([]byte{}, data...), ' '), false},
		{"not an event", subject, []byte("junk"), false},
		{"nothing", subject, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, js := setup(t)
			forged := forge(t, js, tc.subject, ev.ID, tc.data)
			seq, err := PublishDecision(testCtx(t), js, ev, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ours := seq == forged; ours != tc.ours {
				t.Errorf("taken for the decision: %t, want %t", ours, tc.ours)
			}
			if !tc.ours {
				stored(t, js, seq, ev, ImpostorID(ev.ID, forged))
			}
		})
	}

	t.Run("a chain of forgeries", func(t *testing.T) {
		t.Parallel()
		_, js := setup(t)
		id := ev.ID
		for range maxImpostors {
			id = ImpostorID(ev.ID, forge(t, js, subject, id, []byte("junk")))
		}
		seq, err := PublishDecision(testCtx(t), js, ev, 0)
		if err != nil {
			t.Fatal(err)
		}
		stored(t, js, seq, ev, id)

		long := decisionAt(t, ev.Time)
		long.ID = drovertype.EventID(event.FlowCompleted, "f:r1")
		id = long.ID
		for range maxImpostors + 1 {
			id = ImpostorID(long.ID, forge(t, js, subject, id, []byte("junk")))
		}
		if _, err := PublishDecision(testCtx(t), js, long, 0); !errors.Is(err, ErrImpostors) {
			t.Errorf("%d forgeries in a row: %v, want ErrImpostors", maxImpostors+1, err)
		}
	})
}

// The very decision stored under its id before what it was decided from
// (a forger who wrote it before the flow got there) is not the decision:
// the fold judged it already. Stored after, it is.
func TestPublishDecisionStepsOverWhatTheFoldJudged(t *testing.T) {
	t.Parallel()
	ev := decisionAt(t, time.Now())
	data, _ := ev.Encode()
	for _, tc := range []struct {
		name  string
		after int64 // folded, relative to the copy's sequence
		ours  bool
	}{
		{"folded before the copy", -1, true},
		{"folded up to the copy", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, js := setup(t)
			ctx := testCtx(t)
			forged := forge(t, js, event.Subject("f", event.FlowCompleted), ev.ID, data)
			folded := uint64(int64(forged) + tc.after)
			seq, err := PublishDecision(ctx, js, ev, folded)
			if err != nil {
				t.Fatal(err)
			}
			if ours := seq == forged; ours != tc.ours {
				t.Errorf("taken for the decision: %t, want %t", ours, tc.ours)
			}
			// The next round, decided from the same fold.
			b := NewBatch(js)
			b.Folded = folded
			b.Event(ctx, ev)
			if err := b.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if n, want := streamMsgs(t, js, EventsStream), map[bool]uint64{true: 1, false: 2}[tc.ours]; n != want {
				t.Errorf("%d messages stored, want %d", n, want)
			}
		})
	}
}

// A batch checks its events as PublishDecision does.
func TestBatchStepsOverAForgery(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	ev := decisionAt(t, time.Now())
	forged := forge(t, js, event.Subject("f", event.FlowCompleted), ev.ID, []byte("junk"))
	for range 2 {
		b := NewBatch(js)
		b.Event(ctx, ev)
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, js, EventsStream); n != 2 {
		t.Fatalf("%d messages stored, want the forgery and the decision", n)
	}
	stored(t, js, forged+1, ev, ImpostorID(ev.ID, forged))
}

// A forgery deleted since (an operator purging junk) holds no decision:
// the decision is stored under the id the forgery's sequence names.
func TestPublishDecisionAfterTheForgeryIsDeleted(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	ev := decisionAt(t, time.Now())
	forged := forge(t, js, event.Subject("f", event.FlowCompleted), ev.ID, []byte("junk"))
	s, err := js.Stream(ctx, EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, forged); err != nil {
		t.Fatal(err)
	}
	seq, err := PublishDecision(ctx, js, ev, 0)
	if err != nil {
		t.Fatal(err)
	}
	stored(t, js, seq, ev, ImpostorID(ev.ID, forged))
}
