// Package adaptertest is the conformance suite of the runtime adapter
// contract (package adapter): RunConformance checks, against a real run of
// a CLI or of its fake, what every Adapter promises, and for an in-process
// runtime (adapter.InProcess, the native runtime) what its Run promises
// instead: runs that succeed, fail, time out and stop on cancel, the
// environment its commands see, and its scope holding before a change.
//
// It is test support: only tests import it, so neither daemon links
// package testing (internal/codecheck asserts that). It must not know about
// the worker, NATS or events.
package adaptertest
