// Package adapter owns the runtime contract: what Drover needs of one
// runtime to run an attempt's task, whatever runs its agent — a CLI started
// as a process, or the native runtime's loop inside the worker (package
// native). As Nomad's task drivers do, a runtime starts a task and hands
// back a Handle (adapter.go): Wait for how it ended (an Exit), Stop it
// with a cause (a CLI's process group gets SIGTERM, its grace period, then
// SIGKILL), Inspect what runs (its argv, the environment of its
// processes, its credential's fingerprint). Initialize checks the runtime
// can run here, Capabilities says what it supports, and Classify judges
// an Exit, with what the output said, into Drover's error classes.
// What only some runtimes do is a small interface of its own, found by a
// type assertion: HealthChecker (health checked afresh), OutputReader (a
// CLI's output parsed with package transcript's parser for its format,
// which also decides while it runs whether it can still succeed, StopOn),
// Evaluator (more than the capabilities: the model API, the tools, how the
// scope holds, the budget). Defaults, embedded, gives a runtime that judges
// its own run the Classify it needs.
//
// A task's sandbox is the attempt's: Start tells the task's Confine what
// its processes need (Needs: the program, its environment, the paths and
// ports of Sandbox) and runs them through the Confiner it gets back.
//
// CommandAdapter is the implementation here: every CLI runtime, built in
// or configured (config.Runtime), is a command whose environment comes from
// an allowlist and whose HOME may be private to the attempt; its Handle
// wraps package supervise's process (process.go). The environment carries
// the variables the CLI's own provider configuration names as holding its
// keys (KeyVariables: codex config.toml, pi models.json, opencode and kilo
// {env:NAME}), and its sandbox the ports of the model endpoints named there
// and by its *_BASE_URL variables (Endpoint, provider.go), read where the
// CLI reads them, never from the repository nor from a file an attempt can
// write. Package adaptertest holds the conformance suite every runtime
// must pass (RunConformance), run by this package's tests against the demo
// agent's persona of each CLI and by package native's against it.
//
// The lifecycle around a task (checkout, events, checks) is driven by
// package attempt; a runtime must not know about NATS, git, flows or
// events (a task's scope, flow.Scope, is the one part of a flow a runtime
// is given, for the one that enforces it itself).
package adapter
