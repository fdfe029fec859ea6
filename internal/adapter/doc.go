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
// opencode and kilo {env:NAME}), read where the CLI reads it, never from
// the repository.
// Optional capabilities are small interfaces of their own (OutputReader,
// HealthChecker).
//
// CommandAdapter is the one implementation today: every runtime, built in
// or configured (config.Runtime), is a command whose environment comes from
// an allowlist and whose HOME may be private to the attempt. Package
// adaptertest holds the conformance suite every adapter must pass
// (RunConformance), run by this package's tests against the demo agent's
// persona of each CLI.
//
// The lifecycle itself (worktree, supervision, observation, events) is driven
// by package attempt; an adapter must not know about NATS, git, flows or
// events.
package adapter
