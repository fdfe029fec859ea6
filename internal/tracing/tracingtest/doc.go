// Package tracingtest helps tests of Drover's tracing: an in-process OTLP
// trace receiver that listens on a free loopback port, over OTLP/HTTP
// (protobuf) or OTLP/gRPC, and keeps every span it is sent, flattened for
// assertions; and Install, which makes a tracer provider the OTel global
// for one test.
//
// It must not import package tracing, whose own tests use it.
package tracingtest
