// Package telemetry serves Prometheus metrics and health endpoints.
//
// Metrics are recorded through the OpenTelemetry API (Meter). Until Start
// installs the SDK meter provider with a Prometheus exporter, the global
// provider is a no-op, so instruments cost nothing when the HTTP listener is
// off (http.listen "").
//
// It must not know Drover's components: the controller and the worker make
// their own instruments (Meter) and register their readiness checks
// (AddCheck); what else a process serves on the listener it mounts
// (Server.Mount: the controller's console); tracing is package tracing's.
package telemetry
