// Package supervise runs one coding-agent CLI as a supervised child process.
//
// It owns everything between "here is a binary, its argv, a worktree and an
// environment" and "here is how it ended and what it printed":
//
//   - launching the process in its own process group, with the exact
//     environment the caller built (nothing of the worker's leaks in) and a
//     parent-death signal so the CLI cannot outlive a crashed worker;
//   - feeding stdin, reading stdout and stderr with fixed buffers, keeping a
//     bounded head+tail capture of each stream, and handing every chunk to the
//     caller (for live streaming) and to an optional unbounded log writer;
//   - wall-clock and no-output timeouts, and a clean stop: SIGTERM to the
//     whole group, a grace period, then SIGKILL to the whole group;
//   - making sure nothing the CLI spawned survives it: when the leader exits,
//     for whatever reason, the rest of its process group is killed.
//
// A caller may start the process through another program first
// (Spec.Launch): internal/sandbox puts its re-exec step there, which
// confines the process and execs it. Supervision is the same either way
// (the suite runs twice, the second time with every process confined).
//
// It must not know what the process is or what its output means: nothing of
// NATS, git, events, adapters, prompts or sandboxes belongs here. Callers translate
// OnOutput chunks into events and a Result into an attempt outcome.
//
// Memory is bounded whatever the child prints: two fixed read buffers plus at
// most Spec.MaxCapture bytes per stream. Goroutines are all owned by the
// Process and have ended when Wait returns.
//
// Linux is the supported platform. Other Unix systems build and run, but
// without the parent-death signal and with a (theoretical) pid-reuse window
// when cleaning up the process group; see proc_linux.go and proc_unix.go.
//
// Known limit: a descendant that calls setsid(2) (or setpgid to another group)
// leaves the process group and is not killed by the group cleanup. Confining
// a CLI for real needs a cgroup per run (kill via cgroup.kill); that is out of
// scope here. Such an escapee holding an output pipe open cannot block Wait:
// after the leader exits, pipes are drained for at most a short deadline.
package supervise
