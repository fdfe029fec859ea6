package controller

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/event"
	"github.com/drover-dev/drover/internal/projection"

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
// whole log into an empty store, as after a crash, and checks that the
// ending spans come out again with the same ids and times.
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
	h.publish("claim-a", event.AttemptClaimed, id, "a", attA, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish("report-a", event.AttemptReported, id, "a", attA, 1, event.Report{Success: true, Branch: "drover/x/a/1", Commit: "abc"})
	h.publish("claim-b", event.AttemptClaimed, id, "b", attB, 1, event.AttemptClaimedData{Worker: "w2"})
	h.publish("report-b", event.AttemptReported, id, "b", attB, 1, event.Report{
		ExitCode: 3, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Category: drovertype.CategoryRuntime, Message: "exit code 3"}})
	h.waitFor("the integration to be scheduled", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	h.publish("integrated", event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 1), 1,
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

	names := []string{"flow traced", "task a", "task b", "task c", "attempt 1"}
	first := waitSpans(t, rec, names, 6) // two attempt spans
	tid := tracing.TraceID(id)
	flowSpan := first["flow traced"][0]
	checkSpan(t, flowSpan, tid, tracing.FlowSpanID(id), trace.SpanID{}, st.flow.SubmittedAt, st.flow.CompletedAt)
	if flowSpan.Status().Code != codes.Error {
		t.Errorf("a failed flow's span: status %v", flowSpan.Status())
	}
	checkSpan(t, first["task a"][0], tid, tracing.TaskSpanID(id, "a"), tracing.FlowSpanID(id), st.a.ScheduledAt, st.a.EndedAt)
	checkSpan(t, first["task b"][0], tid, tracing.TaskSpanID(id, "b"), tracing.FlowSpanID(id), st.b.ScheduledAt, st.taskB.UpdatedAt)
	checkSpan(t, first["task c"][0], tid, tracing.TaskSpanID(id, "c"), tracing.FlowSpanID(id), st.flow.SubmittedAt, time.Time{})
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
	if c := first["task c"][0]; spanAttr(c, "error.type") != "BLOCKED" {
		t.Errorf("blocked task c: %v", c.Attributes())
	}

	// Every event folded got a process span under the span that published
	// it; the API's and the test's publishes have no span, so theirs are
	// under the derived span of what the event is about.
	var process, publish int
	for _, s := range rec.Ended() {
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

	// A refold (a crashed controller's store is behind, or lost) emits the
	// ending spans again: same ids, same times.
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
