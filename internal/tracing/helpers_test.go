package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

// recorder returns a Drover tracer provider (derived ids, trace-id
// sampling) recording ended spans in memory.
func recorder(t *testing.T, ratio float64) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := NewProvider(ratio, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// useGlobal installs tp as the OTel global for one test; tests that call
// it must not run in parallel.
func useGlobal(t *testing.T, tp *sdktrace.TracerProvider) { tracingtest.Install(t, tp) }

// resetGlobals puts the no-op provider and propagator back.
func resetGlobals() {
	otel.SetTracerProvider(noop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
