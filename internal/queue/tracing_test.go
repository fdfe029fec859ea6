package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/tracing"
	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

// These tests install a global tracer provider, so none runs in parallel.

func recordSpans(t testing.TB) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracingtest.Install(t, tp)
	return rec
}

// TestTracedJobThroughJetStream publishes a job with tracing on, pulls it
// through a real consumer as a worker does, and continues the trace from
// the delivered headers.
func TestTracedJobThroughJetStream(t *testing.T) {
	_, js := setup(t)
	rec := recordSpans(t)
	ctx := testCtx(t)
	j := newJob("f1", "t1", 1, "default", "demo")
	publishJob(t, js, j)
	publishJob(t, js, j) // a restarted controller queues it again: deduplicated

	msg, err := attemptConsumer(t, js, "default", "demo", time.Minute).Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = msg.Ack()
	if msg.Headers().Get("traceparent") == "" || msg.Headers().Get(jetstream.MsgIDHeader) != j.Attempt {
		t.Fatalf("delivered headers %v: want traceparent and Nats-Msg-Id", msg.Headers())
	}
	_, span := tracing.StartProcess(ctx, msg.Headers(), tracing.Message{Subject: msg.Subject(), Template: AttemptsTemplate, ID: j.Attempt}, tracing.Owner{})
	span.End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want two publishes and a process", len(spans))
	}
	pub, again, proc := spans[0], spans[1], spans[2]
	if spanAttr(pub, "drover.event.duplicate") != "" || spanAttr(again, "drover.event.duplicate") != "true" {
		t.Errorf("the deduplicated publish is not marked, or the first is")
	}
	if pub.Name() != "publish drover.attempts.default.demo" || pub.SpanKind() != trace.SpanKindProducer {
		t.Errorf("publish span %q kind %s", pub.Name(), pub.SpanKind())
	}
	if pub.Parent().SpanID() != tracing.AttemptSpanID(j.Attempt) || pub.SpanContext().TraceID() != tracing.TraceID("f1") {
		t.Errorf("the job's publish span is not a child of its attempt's derived span: %v", pub.Parent())
	}
	if proc.Parent().SpanID() != pub.SpanContext().SpanID() || proc.SpanContext().TraceID() != tracing.TraceID("f1") {
		t.Errorf("process span parent %v, want the publish span %s", proc.Parent(), pub.SpanContext().SpanID())
	}
}

func TestTracedEventOwners(t *testing.T) {
	_, js := setup(t)
	rec := recordSpans(t)
	ctx := testCtx(t)
	for _, ev := range []*event.Event{
		mustEvent(t, "flow_completed:f1", event.FlowCompleted, "f1", "", ""),
		mustEvent(t, "task_cancelled:f1/t1:0", event.TaskCancelled, "f1", "t1", ""),
		mustEvent(t, "task_failed:f1_t1_1", event.TaskFailed, "f1", "t1", "f1_t1_1"),
		mustEvent(t, "flow_integrated:f1__integrate_1:1", event.FlowIntegrated, "f1", "", "f1__integrate_1"),
	} {
		seq, err := PublishEvent(ctx, js, ev)
		if err != nil {
			t.Fatal(err)
		}
		if h := getMsg(t, js, EventsStream, seq).Header; nats.Header(h).Get("traceparent") == "" {
			t.Errorf("%s stored without traceparent: %v", ev.ID, h)
		}
	}
	want := []trace.SpanID{tracing.FlowSpanID("f1"), tracing.TaskSpanID("f1", "t1"), tracing.AttemptSpanID("f1_t1_1"), tracing.FlowSpanID("f1")}
	spans := rec.Ended()
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d", len(spans), len(want))
	}
	for i, s := range spans {
		if s.Parent().SpanID() != want[i] {
			t.Errorf("span %d (%s): parent %s, want %s", i, s.Name(), s.Parent().SpanID(), want[i])
		}
	}
	// A publisher with a span of its own (a worker's phase) keeps it.
	pctx, phase := tracing.Tracer().Start(ctx, "execute")
	if _, err := PublishEvent(pctx, js, mustEvent(t, "runtime_exited:f1_t1_1:1", event.RuntimeExited, "f1", "t1", "f1_t1_1")); err != nil {
		t.Fatal(err)
	}
	phase.End()
	spans = rec.Ended()
	if last := spans[len(spans)-2]; last.Parent().SpanID() != phase.SpanContext().SpanID() {
		t.Errorf("publish inside a phase: parent %s, want the phase %s", last.Parent().SpanID(), phase.SpanContext().SpanID())
	}
}

func TestUntracedPublishAddsNoHeader(t *testing.T) {
	_, js := setup(t)
	seq, err := PublishEvent(testCtx(t), js, newEvent(t, "attempt_claimed:f1_t1_1:1", event.AttemptClaimed, "f1"))
	if err != nil {
		t.Fatal(err)
	}
	if h := nats.Header(getMsg(t, js, EventsStream, seq).Header); h.Get("traceparent") != "" || h.Get("tracestate") != "" {
		t.Errorf("tracing off, yet the event carries %v", h)
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

func mustEvent(t testing.TB, id string, typ event.Type, flowID, task, attempt string) *event.Event {
	t.Helper()
	ev, err := event.New(id, typ, time.Now(), flowID, task, attempt, 1, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// BenchmarkTracePublish is the cost tracing adds to each publish, without
// the network: off (nothing installed) it must be a type check, no
// allocation; on, one producer span and a traceparent header.
func BenchmarkTracePublish(b *testing.B) {
	ev := mustEvent(b, "runtime_exited:f1_t1_1:1", event.RuntimeExited, "f1", "t1", "f1_t1_1")
	run := func(b *testing.B) {
		b.ReportAllocs()
		msg := &nats.Msg{Subject: "drover.events.f1.runtime_exited", Header: nats.Header{}}
		for b.Loop() {
			_, end := tracePublish(context.Background(), msg, func() (tracing.Message, tracing.Owner) {
				return tracing.Message{Template: EventsTemplate, Destination: EventDestination(string(ev.Type)), ID: ev.ID}, EventOwner(ev)
			})
			end(nil, nil)
		}
	}
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		tp := tracing.NewProvider(1, sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tracingtest.Install(b, tp)
		run(b)
	})
}

// BenchmarkPublishEvent publishes to a real in-process JetStream, tracing
// off and on, to set the cost above against a publish's.
func BenchmarkPublishEvent(b *testing.B) {
	_, js := setup(b)
	run := func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		prefix := fmt.Sprintf("attempt_claimed:f1_t1_1:%s:%d", b.Name(), time.Now().UnixNano())
		i := 0
		for b.Loop() {
			i++
			ev := newEvent(b, fmt.Sprintf("%s:%d", prefix, i), event.AttemptClaimed, "f1")
			if _, err := PublishEvent(ctx, js, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		tp := tracing.NewProvider(1, sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tracingtest.Install(b, tp)
		run(b)
	})
}

// TestTracingOffAllocatesNothing guards the hot path: with no provider
// installed, publishing pays a type check, no allocation.
func TestTracingOffAllocatesNothing(t *testing.T) {
	ev := mustEvent(t, "runtime_exited:f1_t1_1:1", event.RuntimeExited, "f1", "t1", "f1_t1_1")
	msg := &nats.Msg{Subject: "drover.events.f1.runtime_exited", Header: nats.Header{}}
	allocs := testing.AllocsPerRun(100, func() {
		_, end := tracePublish(context.Background(), msg, func() (tracing.Message, tracing.Owner) {
			return tracing.Message{Template: EventsTemplate, Destination: EventDestination(string(ev.Type)), ID: ev.ID}, EventOwner(ev)
		})
		end(nil, nil)
	})
	if allocs != 0 || len(msg.Header) != 0 {
		t.Errorf("tracing off: %v allocations per publish, header %v", allocs, msg.Header)
	}
}
