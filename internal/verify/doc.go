// Package verify runs a task's verification commands in an attempt's
// worktree once the CLI has exited: each command is `sh -c CMD` under
// internal/supervise (a process group of its own, SIGTERM → grace → SIGKILL
// on timeout), in order, stopping at the first failure.
//
// Its results are the report's CommandResult (package event), but it emits
// nothing and knows nothing of adapters: the attempt decides what a failed
// check means.
package verify
