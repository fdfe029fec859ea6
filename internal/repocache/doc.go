// Package repocache owns a worker's cache of repositories: one bare clone
// per repository URL, cloned on first use, fetched as each checkout needs,
// verified before git runs in it and quarantined when something changed
// it, and swept of what a dead process left. Resolve is what a checkout
// asks of it: the repository brought up to date, its base revision and
// the results to merge resolved to commits, and the repository locked for
// the checkout to be made.
//
// Layout of the cache directory:
//
//	<Dir>/<hash16>-<name>.git     bare repository for one URL
//	  drover-digest               what steered git when it was cloned (check.go)
//	  drover-idle/<id>            a parked checkout (Repo.ParkDir; internal/checkout)
//	<Dir>/.clone-*                clone in progress (renamed into place when complete)
//	<Dir>/quarantine/<name>-<t>   a cache found changed, moved aside for inspection
//
// Inside each bare repository the remote's branches live under
// refs/remotes/origin/* (never refs/heads/*), so fetching can never collide
// with a branch checked out in a live worktree; refs/heads/* holds only the
// branches of checkouts.
//
// No agent can change a cache: the agent's git uses a repository of its
// own (internal/checkout), and a confined agent (internal/sandbox) may only
// read the cache's objects. Should a cache change anyway (an agent run
// without the sandbox), it is quarantined before git runs in it again
// (check.go); and every git command runs hardened (internal/git).
//
// It must not know about checkouts' files, agents, attempts, NATS or
// events: callers pass plain values in (URLs, revisions, branch names) and
// get plain values out. It holds no global state; everything hangs off a
// *Cache.
package repocache
