// Package adapter owns the runtime adapter contract: what Drover needs to know
// about one CLI to run it headless — finding and checking the binary
// (Initialize), building its command line, environment and input for an
// attempt (the runtime-specific part of Prepare and Execute), and translating
// how it ended into Drover's error classes (Report).
//
// The lifecycle itself (worktree, supervision, observation, events) is driven
// by package attempt; an adapter must not know about NATS, git or events.
// Package adaptertest holds the conformance suite every adapter must pass.
package adapter
