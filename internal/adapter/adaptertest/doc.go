// Package adaptertest is the conformance suite of the runtime contract
// (package adapter): RunConformance checks, against real tasks of a CLI or
// of its fake and of the native runtime alike, what every Adapter and its
// Handle promise — tasks that succeed, fail, time out and stop on Stop's
// cause or their context's, what Inspect says and what a task asks of its
// sandbox, the environment its processes see — and what a runtime that
// says it does more does: an OutputReader's parser read in Classify, a
// scope prevented before a change, a *CommandAdapter's binary checked.
//
// It is test support: only tests import it, so neither daemon links
// package testing (internal/codecheck asserts that). It must not know about
// the worker, NATS or events.
package adaptertest
