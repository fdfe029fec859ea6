package controller

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/tracing"
	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

// TestTraceOfAFlow runs a flow through the controller with the workers'
// events published by the test, and checks the spans the controller emits
// when the fold ends attempts, tasks and the flow: derived ids, parents,
// real times from the log, errors with their class. Then it refolds the
// whole log into an empty store, as a controller whose data dir was lost
// does, and checks that the ending spans come out again with the same ids
// and times: they are derived from the log alone.
func TestTraceOfAFlow(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracingtest.Install(t, tp)

	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	spec := &flow.Spec{Name: "traced", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{
		{ID: "a", Prompt: "works"},
		{ID: "b", Prompt: "fails"},
		{ID: "c", Prompt: "never runs", DependsOn: []string{"b"}},
	}}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	attA, attB := drovertype.AttemptID(id, "a", 1), drovertype.AttemptID(id, "b", 1)
	h.waitFor("both attempts to be scheduled", func(st *projection.State) bool {
		return st.Attempts[attA] != nil && st.Attempts[attB] != nil
	})
	h.publish(event.AttemptClaimed, id, "a", attA, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", attA, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	h.publish(event.AttemptClaimed, id, "b", attB, 1, event.AttemptClaimedData{Worker: "w2"})
	h.publish(event.AttemptReported, id, "b", attB, 1, event.Report{
		ExitCode: 3, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Category: drovertype.CategoryRuntime, Message: "exit code 3"}})
	h.waitFor("the integration to be scheduled", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	h.publish(event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 1), 1,
		event.FlowIntegratedData{N: 1, Branch: drovertype.IntegrationBranch(id, 1), Commit: "def"})
	h.waitFor("the flow to fail", func(st *projection.State) bool { return st.Flows[id].State == drovertype.FlowFailed })
	var st struct {
		flow  projection.Flow
		a, b  projection.Attempt
		taskB projection.Task
	}
	h.store.Read(func(s *projection.State) {
		st.flow, st.a, st.b, st.taskB = *s.Flows[id], *s.Attempts[attA], *s.Attempts[attB], *s.Task(id, "b")
	})

	names := []string{"flow traced", "task a", "task b", "task c (blocked)", "attempt 1"}
	first := waitSpans(t, rec, names, 6) // two attempt spans
	tid := tracing.TraceID(id)
	flowSpan := first["flow traced"][0]
	checkSpan(t, flowSpan, tid, tracing.FlowSpanID(id), trace.SpanID{}, st.flow.SubmittedAt, st.flow.CompletedAt)
	if flowSpan.Status().Code != codes.Error {
		t.Errorf("a failed flow's span: status %v", flowSpan.Status())
	}
	checkSpan(t, first["task a"][0], tid, tracing.TaskSpanID(id, "a"), tracing.FlowSpanID(id), st.a.ScheduledAt, st.a.EndedAt)
	checkSpan(t, first["task b"][0], tid, tracing.TaskSpanID(id, "b"), tracing.FlowSpanID(id), st.b.ScheduledAt, st.taskB.UpdatedAt)
	checkSpan(t, first["task c (blocked)"][0], tid, tracing.BlockedTaskSpanID(id, "c", 0), tracing.FlowSpanID(id), st.flow.SubmittedAt, time.Time{})
	for _, s := range first["attempt 1"] {
		var a projection.Attempt
		switch s.SpanContext().SpanID() {
		case tracing.AttemptSpanID(attA):
			a = st.a
			if s.Status().Code == codes.Error {
				t.Errorf("attempt a succeeded, its span says %v", s.Status())
			}
		case tracing.AttemptSpanID(attB):
			a = st.b
			if s.Status().Code != codes.Error || spanAttr(s, "error.type") != "RUNTIME_ERROR" || spanAttr(s, "drover.worker.id") != "w2" {
				t.Errorf("failed attempt b: status %v, attributes %v", s.Status(), s.Attributes())
			}
		default:
			t.Fatalf("an attempt span with an id of no attempt: %s", s.SpanContext().SpanID())
		}
		checkSpan(t, s, tid, s.SpanContext().SpanID(), tracing.TaskSpanID(id, a.Task), a.ScheduledAt, a.EndedAt)
		if len(s.Links()) != 1 {
			t.Errorf("attempt %s: %d links, want the process span of the event that ended it", a.ID, len(s.Links()))
		}
	}
	if c := first["task c (blocked)"][0]; spanAttr(c, "error.type") != "BLOCKED" {
		t.Errorf("blocked task c: %v", c.Attributes())
	}

	// Every event folded got a process span under the span that published
	// it; the API's and the test's publishes have no span, so theirs are
	// under the derived span of what the event is about.
	var process, publish int
	for _, s := range flowSpans(rec) {
		switch s.SpanKind() {
		case trace.SpanKindConsumer:
			process++
			if s.SpanContext().TraceID() != tid || !s.Parent().IsRemote() {
				t.Errorf("process span %s: trace %s, parent %v", s.Name(), s.SpanContext().TraceID(), s.Parent())
			}
		case trace.SpanKindProducer:
			publish++
		}
	}
	if process == 0 || publish < process {
		t.Errorf("%d process spans, %d publish spans", process, publish)
	}

	// A refold into a lost store emits the ending spans again: same ids,
	// same times. (One that crashed before committing folds only what it
	// had not committed, whose spans it had not sent: TestTraceOfARetriedFlow.)
	h.stop()
	h.start(filepath.Join(t.TempDir(), "fresh"))
	again := waitSpans(t, rec, names, 12)
	for _, name := range names {
		for i, s := range first[name] {
			var twin sdktrace.ReadOnlySpan
			for _, o := range again[name][len(first[name]):] {
				if o.SpanContext().SpanID() == s.SpanContext().SpanID() {
					twin = o
				}
			}
			if twin == nil || twin.Parent().SpanID() != s.Parent().SpanID() || !twin.StartTime().Equal(s.StartTime()) || !twin.EndTime().Equal(s.EndTime()) {
				t.Errorf("%s #%d: refolded twin %v differs from %v", name, i, twin, s)
			}
		}
	}
}

// waitSpans waits until the recorder holds n spans with the given names,
// and returns them by name in the order they ended.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, names []string, n int) map[string][]sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		by := map[string][]sdktrace.ReadOnlySpan{}
		count := 0
		for _, s := range rec.Ended() {
			for _, name := range names {
				if s.Name() == name {
					by[name] = append(by[name], s)
					count++
				}
			}
		}
		if count >= n {
			return by
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d spans named %v: have %d", n, names, count)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSpan checks a span's ids and its times (end unchecked when zero).
func checkSpan(t *testing.T, s sdktrace.ReadOnlySpan, tid trace.TraceID, sid, parent trace.SpanID, start, end time.Time) {
	t.Helper()
	if s.SpanContext().TraceID() != tid || s.SpanContext().SpanID() != sid || s.Parent().SpanID() != parent {
		t.Errorf("%s: trace %s span %s parent %s; want %s %s %s", s.Name(), s.SpanContext().TraceID(), s.SpanContext().SpanID(),
			s.Parent().SpanID(), tid, sid, parent)
	}
	if !s.StartTime().Equal(start) || (!end.IsZero() && !s.EndTime().Equal(end)) {
		t.Errorf("%s: %s..%s, want %s..%s from the log", s.Name(), s.StartTime(), s.EndTime(), start, end)
	}
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// committedAtEnd records, for each span as it ends, the sequence the store
// had committed by then.
type committedAtEnd struct {
	h  *harness
	mu sync.Mutex
	at map[trace.SpanID]uint64
}

func (c *committedAtEnd) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *committedAtEnd) OnEnd(s sdktrace.ReadOnlySpan) {
	snap, durable := c.h.store.Snapshot()
	_ = snap.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[s.SpanContext().SpanID()] = durable
}
func (c *committedAtEnd) Shutdown(context.Context) error   { return nil }
func (c *committedAtEnd) ForceFlush(context.Context) error { return nil }

// TestTraceOfARetriedFlow: a flow fails (b fails, c is blocked by it), an
// operator retries b, and the flow succeeds in its next round. Every end is
// a span of its own: nothing is sent twice with one id (a backend would
// show it twice), the second round's task and flow spans have ids of their
// own, the retried attempt is under its round's task span, the blocked task
// that then ran has a span for each. Every span names the flow, every
// parent is in the trace, and each ending span was sent only after the
// fold that ended it was committed (a crash before the commit refolds the
// event, and would otherwise send the span again).
func TestTraceOfARetriedFlow(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	h := newHarness(t)
	committed := &committedAtEnd{h: h, at: map[trace.SpanID]uint64{}}
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(committed), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracingtest.Install(t, tp)

	h.start(filepath.Join(t.TempDir(), "state"))
	spec := &flow.Spec{Name: "retried", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{
		{ID: "a", Prompt: "works"},
		{ID: "b", Prompt: "fails, then works"},
		{ID: "c", Prompt: "runs once b has", DependsOn: []string{"b"}},
	}}
	cl := &Client{NC: h.nc}
	id, err := cl.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	a1, b1, b2, c1 := drovertype.AttemptID(id, "a", 1), drovertype.AttemptID(id, "b", 1), drovertype.AttemptID(id, "b", 2), drovertype.AttemptID(id, "c", 1)
	h.waitFor("a and b to be scheduled", func(st *projection.State) bool { return st.Attempts[a1] != nil && st.Attempts[b1] != nil })
	h.publish(event.AttemptClaimed, id, "a", a1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", a1, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	h.publish(event.AttemptClaimed, id, "b", b1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "b", b1, 1, event.Report{
		ExitCode: 3, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Category: "runtime", Message: "exit code 3"}})
	h.waitFor("the first integration", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	h.publish(event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 1), 1,
		event.FlowIntegratedData{N: 1, Branch: drovertype.IntegrationBranch(id, 1), Commit: "def"})
	h.waitFor("the flow to fail", func(st *projection.State) bool { return st.Flows[id].State == drovertype.FlowFailed })

	if _, err := cl.Retry(context.Background(), id+"/b", "try again"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("b's second attempt", func(st *projection.State) bool { return st.Attempts[b2] != nil })
	h.publish(event.AttemptClaimed, id, "b", b2, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "b", b2, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "b", 2), Commit: "b2"})
	h.waitFor("c's attempt", func(st *projection.State) bool { return st.Attempts[c1] != nil })
	h.publish(event.AttemptClaimed, id, "c", c1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "c", c1, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "c", 1), Commit: "c1"})
	h.waitFor("the second integration", func(st *projection.State) bool {
		in := st.Flows[id].Integration
		return in != nil && in.N == 2
	})
	h.publish(event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 2), 1,
		event.FlowIntegratedData{N: 2, Branch: drovertype.IntegrationBranch(id, 2), Commit: "fed"})
	h.waitFor("the flow to succeed", func(st *projection.State) bool { return st.Flows[id].State == drovertype.FlowSucceeded })
	spans := waitSpans(t, rec, []string{"flow retried (round 1)"}, 1)
	var flows struct{ first, second time.Time }
	h.store.Read(func(st *projection.State) { flows.second = st.Flows[id].CompletedAt })

	byID := checkTrace(t, rec, id, committed)
	root := byID[tracing.FlowSpanID(id)]
	if root == nil || root.Name() != "flow retried" || root.Status().Code != codes.Error || !root.EndTime().Before(flows.second) {
		t.Errorf("the root span is not the first round's failure: %v", root)
	}
	round1 := spans["flow retried (round 1)"][0]
	checkSpan(t, round1, tracing.TraceID(id), tracing.FlowRoundSpanID(id, 1), tracing.FlowSpanID(id), root.StartTime(), flows.second)
	if round1.Status().Code == codes.Error {
		t.Errorf("round 1 succeeded, its span says %v", round1.Status())
	}
	for _, want := range []struct {
		name         string
		span, parent trace.SpanID
	}{
		{"task a", tracing.TaskSpanID(id, "a"), tracing.FlowSpanID(id)},
		{"task b", tracing.TaskSpanID(id, "b"), tracing.FlowSpanID(id)},
		{"task b (round 1)", tracing.TaskRoundSpanID(id, "b", 1), tracing.FlowSpanID(id)},
		{"task c (blocked)", tracing.BlockedTaskSpanID(id, "c", 0), tracing.FlowSpanID(id)},
		{"task c", tracing.TaskSpanID(id, "c"), tracing.FlowSpanID(id)},
		{"attempt 1", tracing.AttemptSpanID(b1), tracing.TaskSpanID(id, "b")},
		{"attempt 2", tracing.AttemptSpanID(b2), tracing.TaskRoundSpanID(id, "b", 1)},
		{"attempt 1", tracing.AttemptSpanID(c1), tracing.TaskSpanID(id, "c")},
	} {
		s := byID[want.span]
		if s == nil || s.Name() != want.name || s.Parent().SpanID() != want.parent {
			t.Errorf("%s: %v, want span %s under %s", want.name, s, want.span, want.parent)
		}
	}
	if s := byID[tracing.TaskRoundSpanID(id, "b", 1)]; s != nil && !s.StartTime().Equal(spanStart(byID, tracing.AttemptSpanID(b2))) {
		t.Errorf("task b's second round starts %s, not with its attempt", s.StartTime())
	}
}

// TestTraceOfAFlowRetriedWhileRunning: a task is retried while the flow
// still runs (another task has not finished). The flow's first round ends
// there: the root span is sent then, not at the completion, which is the
// next round's span.
func TestTraceOfAFlowRetriedWhileRunning(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	h := newHarness(t)
	committed := &committedAtEnd{h: h, at: map[trace.SpanID]uint64{}}
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(committed), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracingtest.Install(t, tp)

	h.start(filepath.Join(t.TempDir(), "state"))
	spec := &flow.Spec{Name: "busy", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{
		{ID: "slow", Prompt: "takes its time"},
		{ID: "b", Prompt: "fails, then works"},
	}}
	cl := &Client{NC: h.nc}
	id, err := cl.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	slow, b1, b2 := drovertype.AttemptID(id, "slow", 1), drovertype.AttemptID(id, "b", 1), drovertype.AttemptID(id, "b", 2)
	h.waitFor("both attempts", func(st *projection.State) bool { return st.Attempts[slow] != nil && st.Attempts[b1] != nil })
	h.publish(event.AttemptClaimed, id, "b", b1, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "b", b1, 1, event.Report{
		ExitCode: 3, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Category: "runtime", Message: "exit code 3"}})
	h.waitFor("b to fail", func(st *projection.State) bool { return st.Task(id, "b").State == drovertype.TaskFailed })
	if _, err := cl.Retry(context.Background(), id+"/b", "try again"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("b's second attempt", func(st *projection.State) bool { return st.Attempts[b2] != nil })
	root := waitSpans(t, rec, []string{"flow busy"}, 1)["flow busy"][0]
	if spanAttr(root, "drover.flow.retried") != "true" || root.Status().Code == codes.Error || spanAttr(root, "drover.state") != "running" {
		t.Errorf("the first round, ended by a retry: %v %v", root.Status(), root.Attributes())
	}
	h.publish(event.AttemptClaimed, id, "slow", slow, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "slow", slow, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "slow", 1), Commit: "s"})
	h.publish(event.AttemptClaimed, id, "b", b2, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "b", b2, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "b", 2), Commit: "b2"})
	h.waitFor("the integration", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	h.publish(event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 2), 1,
		event.FlowIntegratedData{N: 2, Branch: drovertype.IntegrationBranch(id, 2), Commit: "fed"})
	h.waitFor("the flow to succeed", func(st *projection.State) bool { return st.Flows[id].State == drovertype.FlowSucceeded })
	round1 := waitSpans(t, rec, []string{"flow busy (round 1)"}, 1)["flow busy (round 1)"][0]
	if round1.Parent().SpanID() != tracing.FlowSpanID(id) || round1.SpanContext().SpanID() != tracing.FlowRoundSpanID(id, 1) {
		t.Errorf("the completion: %v", round1)
	}
	if n := len(waitSpans(t, rec, []string{"flow busy"}, 1)["flow busy"]); n != 1 {
		t.Errorf("the root span sent %d times", n)
	}
	checkTrace(t, rec, id, committed)
}

// checkTrace checks every span the controller sent for a flow: one trace,
// no span id sent twice, drover.flow.id on each, every parent in the
// trace, and every ending span sent after the commit of the event that
// ended it (its link). It returns the spans by id.
func checkTrace(t *testing.T, rec *tracetest.SpanRecorder, flowID string, committed *committedAtEnd) map[trace.SpanID]sdktrace.ReadOnlySpan {
	t.Helper()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range flowSpans(rec) {
		sid := s.SpanContext().SpanID()
		if prev := byID[sid]; prev != nil {
			t.Errorf("span id %s sent twice: %q and %q", sid, prev.Name(), s.Name())
		}
		byID[sid] = s
		if s.SpanContext().TraceID() != tracing.TraceID(flowID) || spanAttr(s, "drover.flow.id") != flowID {
			t.Errorf("%s: trace %s, drover.flow.id %q", s.Name(), s.SpanContext().TraceID(), spanAttr(s, "drover.flow.id"))
		}
	}
	committed.mu.Lock()
	defer committed.mu.Unlock()
	for _, s := range byID {
		if p := s.Parent(); p.IsValid() && byID[p.SpanID()] == nil {
			t.Errorf("%s: its parent %s was never sent", s.Name(), p.SpanID())
		}
		for _, l := range s.Links() {
			fold := byID[l.SpanContext.SpanID()]
			if fold == nil {
				t.Errorf("%s: links to a span never sent", s.Name())
				continue
			}
			seq, _ := strconv.ParseUint(spanAttr(fold, "drover.event.seq"), 10, 64)
			if at := committed.at[s.SpanContext().SpanID()]; seq == 0 || at < seq {
				t.Errorf("%s: sent with sequence %d committed, before the event that ended it (%d)", s.Name(), at, seq)
			}
		}
	}
	return byID
}

// flowSpans are the spans recorded but the controller's elections', which
// are traces of their own (TestTraceOfAnElection).
func flowSpans(rec *tracetest.SpanRecorder) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "leader election" && spanAttr(s, "drover.flow.id") != event.LeadershipFlow {
			out = append(out, s)
		}
	}
	return out
}

func spanStart(byID map[trace.SpanID]sdktrace.ReadOnlySpan, id trace.SpanID) time.Time {
	if s := byID[id]; s != nil {
		return s.StartTime()
	}
	return time.Time{}
}

// TestTraceOfAnElection: each election is a trace of its own: the span from
// winning the lease to folding leader_elected, with the controller and the
// epoch, parent of the election's publish, whose process span the fold
// continues.
func TestTraceOfAnElection(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracingtest.Install(t, tp)

	h := newHarness(t)
	h.cfg.Controller.ID = "ctl-a"
	h.start(filepath.Join(t.TempDir(), "state"))
	el := waitSpans(t, rec, []string{"leader election"}, 1)["leader election"][0]
	if spanAttr(el, "drover.controller.id") != "ctl-a" || spanAttr(el, "drover.leader.epoch") != "1" || el.Status().Code == codes.Error {
		t.Fatalf("election span: %v %v", el.Attributes(), el.Status())
	}
	tid := el.SpanContext().TraceID()
	var publish, process sdktrace.ReadOnlySpan
	deadline := time.Now().Add(10 * time.Second)
	for process == nil && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != tid {
				continue
			}
			switch s.SpanKind() {
			case trace.SpanKindProducer:
				publish = s
			case trace.SpanKindConsumer:
				process = s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if publish == nil || process == nil {
		t.Fatalf("the election's trace has publish %v and process %v", publish, process)
	}
	if publish.Parent().SpanID() != el.SpanContext().SpanID() || process.Parent().SpanID() != publish.SpanContext().SpanID() {
		t.Errorf("election %s → publish (parent %s) → process (parent %s)", el.SpanContext().SpanID(), publish.Parent().SpanID(), process.Parent().SpanID())
	}
	if spanAttr(process, "drover.event.duplicate") != "" {
		t.Error("the election's fold is marked a duplicate: its Nats-Msg-Id is not read as its event id")
	}
}
