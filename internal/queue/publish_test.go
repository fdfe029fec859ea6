package queue

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"
)

func newEvent(t testing.TB, id string, typ event.Type, flowID string) *event.Event {
	t.Helper()
	ev, err := event.New(id, typ, time.Now(), flowID, "t1", flowID+"_t1_1", 1,
		event.AttemptClaimedData{Worker: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func getMsg(t testing.TB, js jetstream.JetStream, stream string, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := testCtx(t)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatalf("get %s #%d: %v", stream, seq, err)
	}
	return m
}

func TestPublishEventDedupAndSubject(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)

	ev := newEvent(t, "attempt_claimed:f1_t1_1:1", event.AttemptClaimed, "f1")
	seq1, err := PublishEvent(ctx, js, ev)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	// A retried publish (same id, e.g. after a lost ack) is dropped by the
	// server and reports the original sequence.
	seq2, err := PublishEvent(ctx, js, ev)
	if err != nil {
		t.Fatalf("republish: %v", err)
	}
	if seq2 != seq1 {
		t.Errorf("republish got sequence %d, want the original %d", seq2, seq1)
	}
	if n := streamMsgs(t, js, EventsStream); n != 1 {
		t.Fatalf("same event id published twice: %d messages stored, want 1", n)
	}

	other := newEvent(t, "attempt_claimed:f1_t1_1:2", event.AttemptClaimed, "f1")
	seq3, err := PublishEvent(ctx, js, other)
	if err != nil {
		t.Fatal(err)
	}
	if seq3 == seq1 {
		t.Errorf("a different event id was deduplicated")
	}
	if n := streamMsgs(t, js, EventsStream); n != 2 {
		t.Fatalf("two event ids: %d messages stored, want 2", n)
	}

	m := getMsg(t, js, EventsStream, seq1)
	if m.Subject != "drover.events.f1.attempt_claimed" {
		t.Errorf("subject %q, want drover.events.f1.attempt_claimed", m.Subject)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != ev.ID {
		t.Errorf("Nats-Msg-Id %q, want the event id %q", got, ev.ID)
	}
	back, err := event.Decode(m.Data)
	if err != nil {
		t.Fatalf("stored event does not decode: %v", err)
	}
	if back.ID != ev.ID || back.Type != ev.Type || back.Flow != "f1" || back.Epoch != 1 {
		t.Errorf("stored event %+v, want %+v", back, ev)
	}

	// The per-flow filter selects exactly that flow's events.
	if _, err := PublishEvent(ctx, js, newEvent(t, "x", event.AttemptClaimed, "f2")); err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, EventsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{FlowEventsFilter("f1")}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 2 {
		t.Errorf("flow f1 filter sees %d events, want 2", info.NumPending)
	}
}

func TestPublishEventWithoutStreams(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	_, js := connect(t, ns)
	// No Ensure: publishing must fail rather than vanish.
	if _, err := PublishEvent(testCtx(t), js, newEvent(t, "e1", event.FlowSubmitted, "f1")); err == nil {
		t.Fatal("publish with no EVENTS stream succeeded")
	}
}

func TestPublishDeadLetter(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)

	data := []byte(`{"v":7,"garbage":true}`)
	reason := "queue: bad job: version 7, want 1\nsecond line"
	if err := PublishDeadLetter(ctx, js, "attempts", reason, data); err != nil {
		t.Fatalf("PublishDeadLetter: %v", err)
	}
	if n := streamMsgs(t, js, DeadLetterStream); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
	m := getMsg(t, js, DeadLetterStream, 1)
	if m.Subject != "drover.deadletter.attempts" {
		t.Errorf("subject %q", m.Subject)
	}
	if !bytes.Equal(m.Data, data) {
		t.Errorf("data %q, want %q", m.Data, data)
	}
	// Header values cannot carry newlines; the text must survive otherwise.
	if got := m.Header.Get(DeadLetterReasonHeader); got != strings.ReplaceAll(reason, "\n", " ") {
		t.Errorf("reason %q, want %q", got, reason)
	}
}

// A poison message is parked even when it (or its reason) is as large as
// anything the server accepts: the dead letter is truncated to fit.
func TestPublishDeadLetterOversized(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)

	data := bytes.Repeat([]byte("x"), 2<<20)
	reason := "queue: bad job: " + strings.Repeat("r", 1<<20)
	if err := PublishDeadLetter(ctx, js, "attempts", reason, data); err != nil {
		t.Fatalf("PublishDeadLetter of a large message: %v", err)
	}
	m := getMsg(t, js, DeadLetterStream, 1)
	if len(m.Data) == 0 || !bytes.Equal(m.Data, data[:len(m.Data)]) {
		t.Errorf("stored %d bytes, want a non-empty prefix of the data", len(m.Data))
	}
	if got := m.Header.Get(DeadLetterReasonHeader); !strings.HasPrefix(got, "queue: bad job: rrr") {
		t.Errorf("reason %.40q... lost", got)
	}
	if got := m.Header.Get(DeadLetterSizeHeader); got != "2097152" {
		t.Errorf("%s = %q, want the original size 2097152", DeadLetterSizeHeader, got)
	}

	// A long reason in a multi-byte script is cut between characters.
	if err := PublishDeadLetter(ctx, js, "events", strings.Repeat("é", 1<<19), []byte("x")); err != nil {
		t.Fatalf("PublishDeadLetter with a long reason: %v", err)
	}
	m = getMsg(t, js, DeadLetterStream, 2)
	if got := m.Header.Get(DeadLetterReasonHeader); !utf8.ValidString(got) || !strings.HasPrefix(got, "éé") {
		t.Errorf("reason cut into invalid UTF-8: %.20q", got)
	}
	if string(m.Data) != "x" {
		t.Errorf("small data changed: %q", m.Data)
	}
}

func TestCheckEventIDs(t *testing.T) {
	ok := func(flowID, task, attempt string, typ event.Type) *event.Event {
		return &event.Event{V: 1, ID: "x", Type: typ, Flow: flowID, Task: task, Attempt: attempt}
	}
	for _, ev := range []*event.Event{
		ok("f-1", "", "", event.FlowSubmitted),
		ok("f-1", "t", "f-1_t_12", event.AttemptClaimed),
		ok("f-1", "", "f-1__integrate_2", event.FlowIntegrated),
	} {
		if err := CheckEventIDs(ev); err != nil {
			t.Errorf("%+v: %v", ev, err)
		}
	}
	for _, ev := range []*event.Event{
		ok("f.>", "", "", event.FlowSubmitted),
		ok("f", "../t", "", event.AttemptClaimed),
		ok("f", "t", "f_t_0", event.AttemptClaimed),
		ok("f", "t", "f_t_1.x", event.AttemptClaimed),
		ok("f", "", "", "flow.submitted"),
		ok("f", "", "", ""),
	} {
		if err := CheckEventIDs(ev); err == nil {
			t.Errorf("%+v: accepted", ev)
		}
	}
}
