// Package adaptertest is the conformance suite of the runtime adapter
// contract (package adapter): RunConformance checks, against a real run of
// a CLI or of its fake, what every Adapter promises.
//
// It is test support: only tests import it, so neither daemon links
// package testing (internal/codecheck asserts that). It must not know about
// the worker, NATS or events.
package adaptertest
