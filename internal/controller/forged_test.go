package controller

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// forger publishes on the bus as anyone without credentials could: its own
// connection, raw bytes, the Nats-Msg-Id of its choice.
type forger struct {
	t  *testing.T
	h  *harness
	nc *nats.Conn
}

func newForger(h *harness) *forger {
	h.t.Helper()
	nc, err := nats.Connect(h.nc.ConnectedUrl())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(nc.Close)
	return &forger{t: h.t, h: h, nc: nc}
}

// take stores, ahead of the controller, a poison event of type typ under
// the id the controller gives its decision about key: the envelope says
// what the decision would, its payload what the fold refuses. The forger
// reads the log as anyone who may publish on it can: it stamps the epoch of
// the leader of the day, whose decisions the fold takes, and takes the
// Nats-Msg-Id that leader's decision gets (id@epoch).
func (f *forger) take(typ event.Type, key, flowID, task, attempt string, data any) {
	f.t.Helper()
	var epoch uint64
	f.h.waitFor("an election", func(st *projection.State) bool {
		if st.Leadership != nil {
			epoch = st.Leadership.Epoch
		}
		return epoch > 0
	})
	id := drovertype.EventID(typ, key)
	ev, err := event.New(id, typ, time.Now(), flowID, task, attempt, 0, data)
	if err != nil {
		f.t.Fatal(err)
	}
	ev.LeaderEpoch = epoch
	raw, _ := ev.Encode()
	msg := &nats.Msg{Subject: queue.EventSubject(flowID, string(typ)), Data: raw, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id+"@"+strconv.FormatUint(epoch, 10))
	if err := f.nc.PublishMsg(msg); err != nil {
		f.t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
}

// poisoned waits until the fold has parked n events as poison.
func (h *harness) poisoned(n int) {
	h.t.Helper()
	h.waitFor("the forgery to be parked as poison", func(st *projection.State) bool { return st.PoisonCount >= n })
}

// countsOnce checks that the decision of type typ, stored once more under
// another Nats-Msg-Id (as a controller that restarted before it folded its
// republished decision would store it), counts once: the fold knows it by
// its event id. Then the log, folded again into an empty store, gives the
// same flow, the forgery poison and no decision made anew: want messages
// of type typ in all.
func (h *harness) countsOnce(flowID string, typ event.Type, want int) {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	last, err := s.GetLastMsgForSubject(ctx, queue.EventSubject(flowID, string(typ)))
	if err != nil {
		h.t.Fatal(err)
	}
	flowState := func() (b []byte, poison int) {
		h.store.Read(func(st *projection.State) { b, _ = json.Marshal(st.Flows[flowID]); poison = st.PoisonCount })
		return b, poison
	}
	h.applied()
	live, _ := flowState()
	if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: last.Subject, Data: last.Data}, jetstream.WithMsgID(last.Header.Get(jetstream.MsgIDHeader)+"#again")); err != nil {
		h.t.Fatal(err)
	}
	h.applied()
	if again, poison := flowState(); string(again) != string(live) || poison != 1 {
		h.t.Errorf("the decision stored again changed the flow (%d poison):\nbefore: %s\nafter:  %s", poison, live, again)
	}

	h.stop()
	h.start(filepath.Join(h.t.TempDir(), "fresh"))
	h.applied()
	res, err := h.ctrl.Rebuild(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if !res.Equal {
		h.t.Errorf("rebuild differs: %v", res.Diffs)
	}
	if refolded, poison := flowState(); string(refolded) != string(live) || poison != 1 {
		h.t.Errorf("refolded flow differs (%d poison):\nlive:     %s\nrefolded: %s", poison, live, refolded)
	}
	if n := h.count(flowID, typ); n != want+1 {
		h.t.Errorf("%d %s messages, want %d and the copy", n, typ, want)
	}
}

// succeedLast has a worker run task, the flow's last, to success and build
// the flow's integration branch; the flow must then succeed.
func (h *harness) succeedLast(flowID, task string) {
	h.t.Helper()
	att := drovertype.AttemptID(flowID, task, 1)
	h.publish(event.AttemptClaimed, flowID, task, att, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, flowID, task, att, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(flowID, task, 1), Commit: "c" + task})
	h.waitFor("the integration", func(st *projection.State) bool { return st.Flows[flowID].Integration != nil })
	h.publish(event.FlowIntegrated, flowID, "", drovertype.IntegrationID(flowID, 1), 1,
		event.FlowIntegratedData{N: 1, Branch: drovertype.IntegrationBranch(flowID, 1), Commit: "i1"})
	h.waitFor("the flow to succeed", func(st *projection.State) bool { return st.Flows[flowID].State == drovertype.FlowSucceeded })
}

// A forged flow_completed stored first under the decision's id is poison,
// and the real one is recorded at once when the flow ends, not when the
// server's dedup window (2 minutes by default) has passed.
func TestForgedFlowCompletedTakesNoDecisionsPlace(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	id, att := h.submitOne()
	h.waitFor("the attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[att] != nil })
	newForger(h).take(event.FlowCompleted, id, id, "", "", event.FlowCompletedData{State: drovertype.FlowSucceeded})
	h.poisoned(1)

	h.succeedLast(id, "a")
	h.countsOnce(id, event.FlowCompleted, 2) // the forgery and the decision
}

// A forged attempt_scheduled, under the id of the decision that schedules
// the next task, does not hold that task back: it starts at once, and the
// flow finishes.
func TestForgedAttemptScheduledTakesNoDecisionsPlace(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	spec := &flow.Spec{Name: "chain", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{
		{ID: "a", Prompt: "first"}, {ID: "b", Prompt: "second", DependsOn: []string{"a"}},
	}}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	attA, attB := drovertype.AttemptID(id, "a", 1), drovertype.AttemptID(id, "b", 1)
	h.waitFor("a's attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[attA] != nil })
	newForger(h).take(event.AttemptScheduled, attB, id, "b", attB, event.AttemptScheduledData{
		N: 1, Runtime: "demo", Pool: "default", Branch: "drover/somewhere/else"})
	h.poisoned(1)

	h.publish(event.AttemptClaimed, id, "a", attA, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", attA, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	h.waitFor("b's attempt to be scheduled", func(st *projection.State) bool {
		a := st.Attempts[attB]
		return a != nil && a.Branch == drovertype.AttemptBranch(id, "b", 1)
	})
	h.succeedLast(id, "b")
	h.countsOnce(id, event.AttemptScheduled, 3) // a's, the forgery and b's
}

// A forged task_failed, under the id of the decision that ends the task,
// does not keep the task from failing, nor the flow from ending.
func TestForgedTaskFailedTakesNoDecisionsPlace(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	one := 1
	spec := &flow.Spec{Name: "once", Repo: "/srv/repo.git", Base: "main", Runtime: "demo",
		Retry: &flow.RetrySpec{MaxAttempts: &one}, Tasks: []flow.Task{{ID: "a", Prompt: "p"}}}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	att := drovertype.AttemptID(id, "a", 1)
	h.waitFor("the attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[att] != nil })
	newForger(h).take(event.TaskFailed, att, id, "a", att, event.TaskFailedData{Reason: "forged", Class: drovertype.ClassRuntimeError})
	h.poisoned(1)

	h.publish(event.AttemptClaimed, id, "a", att, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", att, 1, event.Report{
		Success: false, ExitCode: 3, Error: &event.ErrorInfo{Class: drovertype.ClassRuntimeError, Message: "exit code 3"}})
	h.waitFor("the flow to fail", func(st *projection.State) bool {
		return st.Task(id, "a").State == drovertype.TaskFailed && st.Flows[id].State == drovertype.FlowFailed
	})
	h.countsOnce(id, event.TaskFailed, 2)
}
