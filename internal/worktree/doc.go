// Package worktree owns the git side of an attempt: a cache of bare clones
// (one per repository URL), preparing an attempt's worktree on a fresh
// branch with its dependency results merged in, observing what the agent
// changed relative to that baseline, committing a checkpoint, pushing the
// attempt branch back to the repository, and removing the worktree again or
// keeping its checkout for the next attempt.
//
// It drives the system git binary, never a library, so behaviour matches
// what a human would see in the repository. Every git invocation runs with a
// minimal environment (PATH and HOME only, and GIT_ALLOW_PROTOCOL limiting
// git to its own transports) and with system and global config
// disabled, so a developer's ~/.gitconfig (hooks, signing, default branch)
// cannot change what Drover does. Hooks never run for commands Drover issues.
//
// Observations only read git and the filesystem; nothing an agent reports
// about its own work is trusted here.
//
// The package must not know about NATS, events, adapters, flows or the
// scheduler: callers pass plain values in (URLs, revisions, branch names,
// paths) and get plain values out. It holds no global state; everything
// hangs off a *Cache.
//
// Layout of the cache directory:
//
//	<Dir>/<hash16>-<name>.git     bare repository for one URL
//	  worktrees/<name>            a checkout's admin dir: its index, HEAD (Drover's)
//	  drover-idle/<id>            a released checkout, parked for reuse (reuse.go)
//	  drover-digest               what steered git when it was cloned (cachecheck.go)
//	<Dir>/.clone-*                clone in progress (renamed into place when complete)
//	<Dir>/quarantine/<name>-<t>   a cache found changed, moved aside for inspection
//
// A checkout's .git is the agent's own repository (agentgit.go), not the
// .git file git writes: an agent commits there, borrowing the cache's
// objects read-only, and Observe brings its commits over, verified.
//
// Inside each bare repository the remote's branches live under
// refs/remotes/origin/* (never refs/heads/*), so fetching can never collide
// with an attempt branch that is checked out in a live worktree; refs/heads/*
// holds only the attempt branches created by Prepare.
//
// No agent can change a cache: the agent's git uses its own repository,
// and a confined agent (internal/sandbox) may only read the cache's
// objects. Should a cache change anyway (an agent run without the
// sandbox), it is quarantined before git runs in it again (cachecheck.go);
// and every Drover git command overrides the settings that would run a
// program (hooks, fsmonitor, helpers, pagers, editors, external diffs).
package worktree
