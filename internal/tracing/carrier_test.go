package tracing

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestHeaderCarrier(t *testing.T) {
	t.Parallel()
	h := nats.Header{}
	h.Set("Nats-Msg-Id", "ev-1") // nats.Header.Set canonicalises nothing: keys stay as written
	h["Traceparent"] = []string{"00-first-01", "00-second-01"}
	c := HeaderCarrier(h)
	for _, key := range []string{"traceparent", "Traceparent", "TRACEPARENT"} {
		if got := c.Get(key); got != "00-first-01" {
			t.Errorf("Get(%q) = %q, want the first value", key, got)
		}
	}
	if got := c.Get("tracestate"); got != "" {
		t.Errorf("Get of a missing key = %q", got)
	}
	c.Set("traceparent", "00-new-01")
	if _, old := h["Traceparent"]; old || c.Get("TraceParent") != "00-new-01" || len(h["traceparent"]) != 1 {
		t.Errorf("Set left %v", h)
	}
	keys := c.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"Nats-Msg-Id", "traceparent"}) {
		t.Errorf("Keys = %v", keys)
	}
	if HeaderCarrier(nil).Get("traceparent") != "" || len(HeaderCarrier(nil).Keys()) != 0 {
		t.Error("a nil header is not empty")
	}
}

// TestCarrierRoundTrip injects a span context with the W3C propagator,
// changes the header's case as another client might, and extracts it back.
func TestCarrierRoundTrip(t *testing.T) {
	t.Parallel()
	sc := Owner{Flow: "f", Task: "t", Attempt: "f_t_1"}.SpanContext()
	ts, err := trace.ParseTraceState("drover=1")
	if err != nil {
		t.Fatal(err)
	}
	sc = sc.WithTraceState(ts)
	h := nats.Header{}
	prop := propagation.TraceContext{}
	prop.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), HeaderCarrier(h))
	if h.Get("traceparent") == "" || h.Get("tracestate") != "drover=1" {
		t.Fatalf("injected %v", h)
	}
	h["Traceparent"], h["TraceState"] = h["traceparent"], h["tracestate"]
	delete(h, "traceparent")
	delete(h, "tracestate")
	got := trace.SpanContextFromContext(prop.Extract(context.Background(), HeaderCarrier(h)))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || got.TraceState().Get("drover") != "1" {
		t.Errorf("extracted %v, want %v", got, sc)
	}
}
