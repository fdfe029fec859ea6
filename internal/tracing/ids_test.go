package tracing

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestDerivedIDs(t *testing.T) {
	t.Parallel()
	const golden = "hello-x1y2z3"
	// Stable across processes and releases: a change here splits the trace
	// of every flow running during an upgrade in two.
	for _, tc := range []struct{ got, want string }{
		{TraceID(golden).String(), "bca42af121fb8f4180240ac3bf4d412e"},
		{FlowSpanID(golden).String(), "13a44576d0376a22"},
		{TaskSpanID(golden, "greet").String(), "2050a86b943ff1f8"},
		{AttemptSpanID(golden + "_greet_1").String(), "5316f633b781cb4f"},
	} {
		if tc.got != tc.want {
			t.Errorf("derived id %s, want %s", tc.got, tc.want)
		}
	}
	if TraceID(golden) == TraceID(golden+"x") {
		t.Error("different flows share a trace id")
	}
	// Round 0 is the first end: the ids every process derives.
	if TaskRoundSpanID(golden, "greet", 0) != TaskSpanID(golden, "greet") || FlowRoundSpanID(golden, 0) != FlowSpanID(golden) {
		t.Error("round 0 is not the task's or the flow's own span")
	}
	seen := map[trace.SpanID]string{}
	for name, id := range map[string]trace.SpanID{
		"flow":                 FlowSpanID(golden),
		"task a":               TaskSpanID(golden, "a"),
		"task b":               TaskSpanID(golden, "b"),
		"attempt a_1":          AttemptSpanID(golden + "_a_1"),
		"attempt a_2":          AttemptSpanID(golden + "_a_2"),
		"other flow":           FlowSpanID(golden + "x"),
		"task of other":        TaskSpanID(golden+"x", "a"),
		"flow named task":      FlowSpanID(golden + "\x00a"),
		"task a round 1":       TaskRoundSpanID(golden, "a", 1),
		"task a round 2":       TaskRoundSpanID(golden, "a", 2),
		"task b round 1":       TaskRoundSpanID(golden, "b", 1),
		"task a blocked":       BlockedTaskSpanID(golden, "a", 0),
		"task a blocked in 1":  BlockedTaskSpanID(golden, "a", 1),
		"task b blocked":       BlockedTaskSpanID(golden, "b", 0),
		"flow round 1":         FlowRoundSpanID(golden, 1),
		"flow round 2":         FlowRoundSpanID(golden, 2),
		"other flow round 1":   FlowRoundSpanID(golden+"x", 1),
		"task 1 of other flow": TaskRoundSpanID(golden+"x", "a", 1),
	} {
		if !id.IsValid() {
			t.Errorf("%s: invalid span id", name)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share span id %s", name, prev, id)
		}
		seen[id] = name
	}
}

func TestOwnerSpanContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    Owner
		want trace.SpanID
	}{
		{Owner{Flow: "f"}, FlowSpanID("f")},
		{Owner{Flow: "f", Task: "t"}, TaskSpanID("f", "t")},
		{Owner{Flow: "f", Task: "t", Attempt: "f_t_1"}, AttemptSpanID("f_t_1")},
		// An integration build has an id but no task: it belongs to the flow.
		{Owner{Flow: "f", Attempt: "f__integrate_1"}, FlowSpanID("f")},
	} {
		sc := tc.o.SpanContext()
		if sc.SpanID() != tc.want || sc.TraceID() != TraceID("f") || !sc.IsRemote() || !sc.IsSampled() {
			t.Errorf("%+v: span context %v, want span %s in trace %s, remote, sampled", tc.o, sc, tc.want, TraceID("f"))
		}
	}
	if (Owner{}).SpanContext().IsValid() {
		t.Error("an owner without a flow has a span context")
	}
	if ctx := ContextWithOwner(context.Background(), Owner{}); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("ContextWithOwner(Owner{}) set a parent")
	}
}

// TestDerivedSpans starts the flow, task and attempt spans as the
// controller does, in a first round and in a round after an operator retry,
// and checks they get the derived ids and parents, while a child started
// from their context gets fresh ids.
func TestDerivedSpans(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t, 1)
	tr := tp.Tracer("test")
	ctx := context.Background()
	_, flow := StartFlow(ctx, tr, "f")
	_, task := StartTask(ctx, tr, "f", "t", 0)
	actx, attempt := StartAttempt(ctx, tr, "f", "t", 0, "f_t_1")
	_, child := tr.Start(actx, "child")
	_, blocked := StartBlockedTask(ctx, tr, "f", "u", 0)
	_, flow1 := StartFlowRound(ctx, tr, "f", 1)
	_, task1 := StartTask(ctx, tr, "f", "t", 1)
	_, attempt1 := StartAttempt(ctx, tr, "f", "t", 1, "f_t_2")
	blocked.SetName("blocked")
	flow1.SetName("flow 1")
	task1.SetName("task 1")
	attempt1.SetName("attempt 1")
	for _, s := range []trace.Span{child, attempt, task, blocked, flow, attempt1, task1, flow1} {
		s.End()
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	check := func(name string, id, parent trace.SpanID) {
		t.Helper()
		s := spans[name]
		if s == nil {
			t.Fatalf("no %s span", name)
		}
		if s.SpanContext().TraceID() != TraceID("f") {
			t.Errorf("%s: trace %s, want %s", name, s.SpanContext().TraceID(), TraceID("f"))
		}
		if id.IsValid() && s.SpanContext().SpanID() != id {
			t.Errorf("%s: span id %s, want %s", name, s.SpanContext().SpanID(), id)
		}
		if s.Parent().SpanID() != parent {
			t.Errorf("%s: parent %s, want %s", name, s.Parent().SpanID(), parent)
		}
	}
	check("flow", FlowSpanID("f"), trace.SpanID{})
	check("task", TaskSpanID("f", "t"), FlowSpanID("f"))
	check("attempt", AttemptSpanID("f_t_1"), TaskSpanID("f", "t"))
	check("child", trace.SpanID{}, AttemptSpanID("f_t_1"))
	check("blocked", BlockedTaskSpanID("f", "u", 0), FlowSpanID("f"))
	check("attempt 1", AttemptSpanID("f_t_2"), TaskRoundSpanID("f", "t", 1))
	check("task 1", TaskRoundSpanID("f", "t", 1), FlowSpanID("f"))
	check("flow 1", FlowRoundSpanID("f", 1), FlowSpanID("f"))
	if id := spans["child"].SpanContext().SpanID(); id == AttemptSpanID("f_t_1") {
		t.Error("a child of a derived span got its parent's id")
	}
}

// TestSamplingAgrees checks that, below ratio 1, the flow's root span and
// spans continuing the flow's derived contexts are sampled alike: the
// decision comes from the trace id, in every process.
func TestSamplingAgrees(t *testing.T) {
	t.Parallel()
	tp, _ := recorder(t, 0.5)
	tr := tp.Tracer("test")
	sampled := 0
	for i := range 200 {
		f := fmt.Sprintf("flow-%d", i)
		_, root := StartFlow(context.Background(), tr, f)
		_, task := StartTask(context.Background(), tr, f, "t", 0)
		_, child := tr.Start(ContextWithOwner(context.Background(), Owner{Flow: f, Task: "t", Attempt: f + "_t_1"}), "phase")
		if root.SpanContext().IsSampled() != task.SpanContext().IsSampled() || root.SpanContext().IsSampled() != child.SpanContext().IsSampled() {
			t.Fatalf("flow %s: root sampled %v, task %v, continued %v", f, root.SpanContext().IsSampled(),
				task.SpanContext().IsSampled(), child.SpanContext().IsSampled())
		}
		if root.SpanContext().IsSampled() {
			sampled++
		}
	}
	if sampled < 50 || sampled > 150 {
		t.Errorf("%d of 200 flows sampled at ratio 0.5", sampled)
	}
}
