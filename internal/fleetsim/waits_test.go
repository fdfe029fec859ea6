package fleetsim

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/worker"
)

func TestClaimWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	l := &Log{claims: []slotEvent{
		// Out of order, as a log holds them: sorted by their time.
		{typ: event.AttemptClaimed, at: at(10), attempt: "c"},
		{typ: event.AttemptScheduled, at: at(1), attempt: "a"},
		{typ: event.AttemptScheduled, at: at(1), attempt: "b"},
		{typ: event.AttemptScheduled, at: at(1), attempt: "c"},
		{typ: event.AttemptClaimed, at: at(2), attempt: "a"},               // a free slot since 0: waited 1
		{typ: event.AttemptClaimed, at: at(3), attempt: "b"},               // the other: waited 2
		{typ: event.AttemptReported, at: at(8), attempt: "a"},              // frees a slot at 8
		{typ: event.FlowIntegrated, at: at(12), attempt: "f__integrate_1"}, // frees one at 12
		{typ: event.AttemptClaimed, at: at(11), attempt: "f__integrate_1", build: true},
		{typ: event.AttemptReported, at: at(9), attempt: "b"}, // frees one at 9
		{typ: event.AttemptScheduled, at: at(11), attempt: "d"},
		{typ: event.AttemptClaimed, at: at(15), attempt: "d"}, // the slot freed at 12: waited 3
	}}
	// c: the slot freed at 8, claimed at 10: waited 2. The build takes the
	// slot freed at 9 and is not counted.
	got := l.ClaimWaits(2, t0)
	if fmt.Sprint(got) != "[1s 2s 2s 3s]" {
		t.Errorf("waits %v, want [1s 2s 2s 3s]", got)
	}
	if p := percentile(got, 99); p != 3*time.Second {
		t.Errorf("p99 %s", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("p50 of nothing %s", p)
	}
}

// TestClaimParts: each claim's wait splits at its job's storing and
// delivery; a claim whose scheduling the log does not hold (a build's) is
// left out, and the parts count from the scheduling whatever the slots did.
func TestClaimParts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	l := &Log{claims: []slotEvent{
		{typ: event.AttemptScheduled, at: ms(0), attempt: "a"},
		{typ: event.AttemptScheduled, at: ms(10), attempt: "b"},
		{typ: event.AttemptClaimed, at: ms(40), attempt: "a"},
	}}
	got := l.ClaimParts([]worker.ClaimTimes{
		{Attempt: "a", Stored: ms(5), Delivered: ms(8), Claimed: ms(12)},
		{Attempt: "b", Stored: ms(30), Delivered: ms(130), Claimed: ms(131)},
		{Attempt: "f__integrate_1", Stored: ms(0), Delivered: ms(900), Claimed: ms(999)},
	})
	want := "[{decided→stored 5ms 20ms} {stored→delivered 3ms 100ms} {delivered→claimed 1ms 4ms}]"
	if fmt.Sprint(got) != want {
		t.Errorf("parts %v, want %s", got, want)
	}
}
