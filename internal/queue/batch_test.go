package queue

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// TestBatchPublishes: a batch larger than its window is stored whole and in
// the order added, jobs run their done only once stored, one message that
// cannot be published is reported without losing the others, and a batch
// published again is deduplicated.
func TestBatchPublishes(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	const n = 2*batchWindow + 10
	publish := func() (stored []string, err error) {
		b := NewBatch(js)
		for i := range n {
			b.Event(ctx, newEvent(t, fmt.Sprintf("attempt_claimed:f1_t1_1:%d", i), event.AttemptClaimed, "f1"))
			if i == n/2 {
				bad := newEvent(t, "attempt_claimed:bad", event.AttemptClaimed, "f1")
				bad.Flow = "no spaces allowed"
				b.Event(ctx, bad)
			}
			if i%100 == 0 {
				j := newJob("f1", fmt.Sprintf("t%d", i), 1, "default", "demo")
				b.Job(ctx, j, func() { stored = append(stored, j.Attempt) })
			}
		}
		return stored, b.Wait(ctx)
	}
	jobs, err := publish()
	if err == nil || !strings.Contains(err.Error(), "attempt_claimed:bad") {
		t.Errorf("Wait = %v, want the bad event's error", err)
	}
	if len(jobs) != 6 {
		t.Errorf("done ran for %d jobs, want 6: %v", len(jobs), jobs)
	}
	if got := streamMsgs(t, js, EventsStream); got != n {
		t.Fatalf("%d events stored, want %d", got, n)
	}
	for seq := uint64(1); seq <= n; seq++ {
		ev, err := event.Decode(getMsg(t, js, EventsStream, seq).Data)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("attempt_claimed:f1_t1_1:%d", seq-1); ev.ID != want {
			t.Fatalf("event #%d is %s, want %s", seq, ev.ID, want)
		}
	}
	if got := streamMsgs(t, js, AttemptsStream); got != 6 {
		t.Errorf("%d jobs stored, want 6", got)
	}
	if _, err := publish(); err == nil {
		t.Error("the bad event published on the second try")
	}
	if got := streamMsgs(t, js, EventsStream); got != n {
		t.Errorf("%d events stored after publishing the batch again, want %d", got, n)
	}
}
