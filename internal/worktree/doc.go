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
//	  drover-idle/<id>            a released checkout, parked for reuse (reuse.go)
//	<Dir>/.clone-*                clone in progress (renamed into place when complete)
//
// Inside each bare repository the remote's branches live under
// refs/remotes/origin/* (never refs/heads/*), so fetching can never collide
// with an attempt branch that is checked out in a live worktree; refs/heads/*
// holds only the attempt branches created by Prepare.
//
// Known limit: the repository-local config in a cache is shared by every
// worktree of that repository, and an agent with write access to its worktree
// can edit it. The settings that would make Drover's own git commands run
// agent-chosen programs (hooks, fsmonitor) are overridden on every command;
// content filters declared via .gitattributes plus local config are not.
package worktree
