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
// because their ids are known from the start.
//
// A backend shows a span sent twice with one id twice, so none is: the
// controller sends an ending span once the fold that ended it is committed
// (internal/controller/tracing.go), and an end after an operator retry,
// which reopens a task and its flow, is a span with an id of its own,
// derived from the round (TaskRoundSpanID, BlockedTaskSpanID,
// FlowRoundSpanID). Round 0 keeps the ids every process derives; only the
// controller, which sends these spans, needs the others.
//
// Every span carries drover.flow.id: the helpers set it from the owner or
// the caller, and a span started under one of the process's own spans
// inherits it (inheritFlow). Every process sets service.instance.id: a
// worker's id, else host-pid (DefaultInstance).
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
// the helpers here return at once (Enabled). With no endpoint it sends to
// the OpenTelemetry specification's defaults, in plain text. Export
// failures are logged when they happen, once per cause, and Shutdown waits
// for a collector that is not there no longer than its first refusal
// (export.go).
//
// It must not know what events mean or how attempts run: callers name the
// flow, task and attempt a span belongs to and set its attributes.
package tracing
