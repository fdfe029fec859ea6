// Package adapter owns the runtime adapter contract: what Drover needs to know
// about one CLI to run it headless — finding and checking the binary
// (Initialize), building its command line, environment and input for an
// attempt (the runtime-specific part of Prepare and Execute), reading its
// output with package transcript's parser for the runtime's format, and
// translating how it ended into Drover's error classes (Classify), and
// deciding from its output while it runs whether it can still succeed
// (StopOn: refused credentials and rate limits it gave up on end it at
// once, its own retries of them after own_retry_timeout). The environment
// carries the variables the CLI's own provider configuration names as
// holding its keys (KeyVariables: codex config.toml, pi models.json,
// opencode and kilo {env:NAME}), and its sandbox the ports of the model
// endpoints named there and by its *_BASE_URL variables (Endpoint,
// provider.go), read where the CLI reads them, never from the repository
// nor from a file an attempt can write.
// Optional capabilities are small interfaces of their own (OutputReader,
// HealthChecker, Evaluator).
//
// CommandAdapter is the implementation here: every CLI runtime, built in
// or configured (config.Runtime), is a command whose environment comes from
// an allowlist and whose HOME may be private to the attempt. A runtime that
// runs inside the worker instead (the native runtime, package native) is an
// InProcess adapter (inprocess.go): the attempt calls its Run, with the
// task's scope, which it enforces itself, in place of a supervised process.
// Package
// adaptertest holds the conformance suite every adapter must pass
// (RunConformance), run by this package's tests against the demo agent's
// persona of each CLI.
//
// The lifecycle itself (worktree, supervision, observation, events) is driven
// by package attempt; an adapter must not know about NATS, git, flows or
// events (a task's scope, flow.Scope, is the one part of a flow an
// in-process runtime is given).
package adapter
