package tracingtest

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Install makes tp and the W3C trace context propagator the OTel globals
// for the rest of the test, as tracing.Setup does, and puts no-ops back when
// it ends. The globals are process-wide: a test that calls it must not run
// in parallel with tests that publish or trace.
func Install(t testing.TB, tp trace.TracerProvider) {
	t.Helper()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}
