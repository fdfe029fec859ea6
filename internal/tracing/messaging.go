package tracing

import (
	"context"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of Drover's spans.
const ScopeName = "github.com/drover-dev/drover"

// Tracer returns Drover's tracer from the global provider. It is looked up
// on each use rather than kept: a tracer taken from the global provider
// before Setup, or from a provider a test replaced, would stay bound to the
// old one.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Enabled reports whether Setup (or a test) installed an SDK tracer
// provider. When it did not, the helpers here return before building any
// attribute or touching a header, so tracing that is off costs a type check.
func Enabled() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// noSpan is what the helpers return when tracing is off: ending it, or
// setting anything on it, does nothing.
var noSpan trace.Span = noop.Span{}

// Message describes one NATS message for a messaging span. Subject is the
// real one; Template is the subject with its variable tokens named
// ("drover.events.{flow}.{type}"); Destination names the span, and must not
// be high-cardinality: the template, or the subject with only its ids left
// as placeholders ("drover.events.{flow}.attempt_reported"). Empty, it is
// the template.
type Message struct {
	Subject     string
	Template    string
	Destination string
	// ID is the Nats-Msg-Id (the event id, the attempt id of a job).
	ID string
	// BodySize is the payload's size in bytes.
	BodySize int
	// Consumer is the JetStream consumer a processed message came through.
	Consumer string
}

func (m Message) spanName(op string) string {
	if m.Destination != "" {
		return op + " " + m.Destination
	}
	return op + " " + m.Template
}

func (m Message) attrs(op attribute.KeyValue, name string) []attribute.KeyValue {
	a := []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"), op, semconv.MessagingOperationName(name),
		semconv.MessagingDestinationName(m.Subject), semconv.MessagingDestinationTemplate(m.Template),
		semconv.MessagingMessageBodySize(m.BodySize),
	}
	if m.ID != "" {
		a = append(a, semconv.MessagingMessageID(m.ID))
	}
	if m.Consumer != "" {
		a = append(a, semconv.MessagingConsumerGroupName(m.Consumer))
	}
	return a
}

// StartPublish starts the producer span of a message about to be published
// and injects its context into msg's headers, so that whoever processes the
// message continues the trace. The span's parent is the span in ctx, or,
// when ctx has none (a controller decision, an API request), the owner's
// derived span; it carries the owner's ids (drover.flow.id, and the task's
// and attempt's when set). End it with End once the server has answered.
func StartPublish(ctx context.Context, msg *nats.Msg, m Message, owner Owner, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = ContextWithOwner(ctx, owner)
	}
	ctx, span := Tracer().Start(ctx, m.spanName("publish"),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(m.attrs(semconv.MessagingOperationTypeSend, "publish")...),
		trace.WithAttributes(owner.attrs()...),
		trace.WithAttributes(attrs...))
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(msg.Header))
	return ctx, span
}

// StartProcess starts the consumer span of a received message, a child of
// the context its headers carry. A message without one is parented to the
// fallback owner's derived span; with no fallback (Owner{}) it gets no span
// at all rather than a stray trace of its own. The span carries the
// fallback's ids; without one, attrs must name the flow (KeyFlow).
func StartProcess(ctx context.Context, h nats.Header, m Message, fallback Owner, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	prop, carrier := otel.GetTextMapPropagator(), HeaderCarrier(h)
	switch {
	case trace.SpanContextFromContext(prop.Extract(context.Background(), carrier)).IsValid():
		ctx = prop.Extract(ctx, carrier)
	case fallback.Flow != "":
		ctx = ContextWithOwner(ctx, fallback)
	default:
		return ctx, noSpan
	}
	return Tracer().Start(ctx, m.spanName("process"),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(m.attrs(semconv.MessagingOperationTypeProcess, "process")...),
		trace.WithAttributes(fallback.attrs()...),
		trace.WithAttributes(attrs...))
}

// End ends span, marking it failed if err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Fail marks span failed with a Drover error class (RATE_LIMITED,
// VERIFICATION_FAILED, ...) and message: status Error, error.type and
// drover.error.class set to the class, so a backend can search by it.
func Fail(span trace.Span, class, message string) {
	if class == "" {
		class = string(drovertype.ClassUnknown)
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(class), KeyErrorClass.String(class))
	if message != "" {
		span.SetAttributes(KeyErrorMessage.String(truncate(message, maxMessage)))
	}
	span.SetStatus(codes.Error, truncate(class+": "+message, maxMessage))
}

const maxMessage = 2 << 10

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
