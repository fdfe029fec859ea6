package tracing

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// inheritFlow gives a span started under one of the process's own spans
// its parent's drover.flow.id when it names none itself, so that every span
// of a flow can be found by it, whoever adds one later. A span continuing a
// remote parent (a message's context) has no attributes to inherit: the
// helpers that start those set the flow themselves (StartProcess,
// StartPublish).
type inheritFlow struct{}

var _ sdktrace.SpanProcessor = inheritFlow{}

func (inheritFlow) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	p, ok := trace.SpanFromContext(parent).(sdktrace.ReadOnlySpan)
	if !ok {
		return
	}
	for _, kv := range s.Attributes() {
		if kv.Key == KeyFlow {
			return
		}
	}
	for _, kv := range p.Attributes() {
		if kv.Key == KeyFlow {
			s.SetAttributes(kv)
			return
		}
	}
}

func (inheritFlow) OnEnd(sdktrace.ReadOnlySpan)      {}
func (inheritFlow) Shutdown(context.Context) error   { return nil }
func (inheritFlow) ForceFlush(context.Context) error { return nil }
