// Package checkout owns an attempt's checkout of a cached repository:
// preparing it (Prepare: resolve with the repo cache, then check out — a
// parked checkout reused or a fresh `git worktree add` — with the
// dependencies' results merged in, batched where it can prove them
// independent), the agent's own repository in it, observing what the
// agent changed relative to the baseline, committing a checkpoint,
// resetting the checkout after its checks, pushing the attempt branch, and
// removing the checkout again or parking it for the next attempt.
//
// Observations only read git and the filesystem; nothing an agent reports
// about its own work is trusted here. Every git command goes through
// internal/git, hardened; Drover's own commands name the checkout's git
// dir in the cache and its work tree, so nothing an agent writes in the
// checkout (its .git, a .gitattributes) steers them.
//
// A checkout's .git is the agent's own repository (agentgit.go), not the
// .git file git writes: an agent commits there, borrowing the cache's
// objects read-only, and Observe brings its commits over, verified.
// Checkouts are parked inside their repository's ParkDir (reuse.go).
//
// The package must not know about NATS, events, adapters, flows or the
// scheduler, nor how the repo cache fetches, verifies or lays out its
// repositories (internal/repocache): callers pass plain values in (URLs,
// revisions, branch names, paths) and get plain values out. It holds no
// global state; everything hangs off a *Checkouts.
package checkout
