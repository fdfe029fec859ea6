// Package tracing owns Drover's OpenTelemetry tracing: one trace per flow,
// flow → task → attempt → the worker's phases, across the controller and the
// worker processes.
//
// A flow lives for hours and survives controller restarts, so no span is
// held open from submission to completion. Instead every process derives the
// same ids from Drover's own: the trace id from the flow id, the flow, task
// and attempt span ids from theirs (ids.go). The controller starts and ends
// those spans when it folds the event that ends them, with the real start
// time from the folded state; anything may parent to them before that,
// because their ids are known from the start. A span emitted twice (a
// controller that crashed after exporting it refolds the same events) has the
// same ids, and a backend keeps one.
//
// Context travels in NATS message headers (W3C traceparent and tracestate,
// read case-insensitively: HeaderCarrier), on the attempt job from the
// controller to the worker and on every event back, with messaging
// semantic-convention attributes on the publish (producer) and process
// (consumer) spans (messaging.go).
//
// Tracing is off by default. Setup installs an SDK tracer provider with an
// OTLP exporter (gRPC or HTTP) only when the configuration or the standard
// OTEL_* variables ask for one; otherwise the OTel globals stay no-ops and
// the helpers here return at once (Enabled).
//
// It must not know what events mean or how attempts run: callers name the
// flow, task and attempt a span belongs to and set its attributes.
package tracing
