package tracing

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

var jobMsg = Message{Subject: "drover.attempts.default.demo", Template: "drover.attempts.{pool}.{runtime}", ID: "f_t_1", BodySize: 42}

func TestOffInjectsNothing(t *testing.T) {
	if Enabled() {
		t.Fatal("tracing is on without Setup")
	}
	msg := &nats.Msg{Subject: jobMsg.Subject}
	ctx, span := StartPublish(context.Background(), msg, jobMsg, Owner{Flow: "f"})
	if span.IsRecording() || msg.Header != nil || trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Errorf("off: span recording %v, header %v", span.IsRecording(), msg.Header)
	}
	h := nats.Header{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	if _, span := StartProcess(context.Background(), h, jobMsg, Owner{Flow: "f"}); span.IsRecording() {
		t.Error("off: process span recording")
	}
	End(span, errors.New("ignored"))
}

// TestPublishThenProcess follows a job from the controller's publish to the
// worker's process span through the headers, as the two processes do.
func TestPublishThenProcess(t *testing.T) {
	tp, rec := recorder(t, 1)
	useGlobal(t, tp)
	owner := Owner{Flow: "f", Task: "t", Attempt: "f_t_1"}
	msg := &nats.Msg{Subject: jobMsg.Subject, Data: make([]byte, 42)}
	_, pub := StartPublish(context.Background(), msg, jobMsg, owner, KeyRuntime.String("demo"))
	End(pub, nil)
	if msg.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent injected: %v", msg.Header)
	}
	// Another client might write the key capitalised.
	msg.Header["Traceparent"] = msg.Header["traceparent"]
	delete(msg.Header, "traceparent")
	worker := jobMsg
	worker.Consumer = "attempts_default_demo"
	_, proc := StartProcess(context.Background(), msg.Header, worker, Owner{})
	End(proc, errors.New("handed back"))

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	p, c := spans[0], spans[1]
	if p.SpanKind() != trace.SpanKindProducer || p.Name() != "publish drover.attempts.{pool}.{runtime}" {
		t.Errorf("publish span: %s %s", p.SpanKind(), p.Name())
	}
	if p.Parent().SpanID() != AttemptSpanID("f_t_1") || p.SpanContext().TraceID() != TraceID("f") {
		t.Errorf("publish span's parent %s in trace %s, want the attempt's derived span", p.Parent().SpanID(), p.SpanContext().TraceID())
	}
	if c.SpanKind() != trace.SpanKindConsumer || c.Parent().SpanID() != p.SpanContext().SpanID() || !c.Parent().IsRemote() {
		t.Errorf("process span: kind %s, parent %v; want a consumer under the publish span %s", c.SpanKind(), c.Parent(), p.SpanContext().SpanID())
	}
	want := map[attribute.Key]string{
		"messaging.system": "nats", "messaging.operation.type": "send", "messaging.operation.name": "publish",
		"messaging.destination.name": jobMsg.Subject, "messaging.destination.template": jobMsg.Template,
		"messaging.message.id": "f_t_1", "drover.runtime": "demo",
		"drover.flow.id": "f", "drover.task.id": "t", "drover.attempt.id": "f_t_1",
	}
	checkAttrs(t, p, want)
	delete(want, "drover.flow.id") // the process span has no fallback here: its caller names the flow
	delete(want, "drover.task.id")
	delete(want, "drover.attempt.id")
	want["messaging.operation.type"], want["messaging.operation.name"] = "process", "process"
	want["messaging.consumer.group.name"] = "attempts_default_demo"
	delete(want, "drover.runtime")
	checkAttrs(t, c, want)
	if c.Status().Code != codes.Error {
		t.Errorf("End with an error: status %v", c.Status())
	}
}

func TestProcessFallback(t *testing.T) {
	tp, rec := recorder(t, 1)
	useGlobal(t, tp)
	if _, span := StartProcess(context.Background(), nil, jobMsg, Owner{}); span.IsRecording() {
		t.Error("a message without context and no fallback got a span")
	}
	_, span := StartProcess(context.Background(), nats.Header{}, jobMsg, Owner{Flow: "f", Task: "t", Attempt: "f_t_1"})
	Fail(span, "VERIFICATION_FAILED", "`go test` exited 1")
	span.End()
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Parent().SpanID() != AttemptSpanID("f_t_1") {
		t.Fatalf("fallback: %d spans, parent %v", len(spans), spans[0].Parent())
	}
	checkAttrs(t, spans[0], map[attribute.Key]string{"error.type": "VERIFICATION_FAILED", "drover.error.class": "VERIFICATION_FAILED",
		"drover.error.message": "`go test` exited 1", "drover.flow.id": "f", "drover.attempt.id": "f_t_1"})
	if st := spans[0].Status(); st.Code != codes.Error || st.Description != "VERIFICATION_FAILED: `go test` exited 1" {
		t.Errorf("status %+v", st)
	}
}

func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", s.Name(), k, got[k], v)
		}
	}
}
