// Package sandbox confines a process with Linux Landlock before its first
// instruction runs: what it may read, write and execute, which TCP ports it
// may connect to or bind, and (Landlock ABI 6) that it can neither signal
// nor reach the abstract sockets of processes outside its sandbox. The
// confinement is inherited by everything the process starts and cannot be
// lifted by any of them.
//
// It owns:
//
//   - probing what the kernel offers (Support, Probe) and refusing to
//     confine with less than MinABI;
//   - turning a Policy — the paths a process may read or write, the paths it
//     must never reach (the worker's secrets), its ports — into Landlock
//     rules (Compile), including the sibling expansion that keeps a secret
//     unreachable inside a directory that is otherwise granted;
//   - the launch: a confined process is started as the running binary with
//     a hidden entry point (package stub) and the ruleset on descriptor 3;
//     the step enforces it and execs the real binary (Confinement.Wrap,
//     Confinement.Cmd), so the worker itself is never restricted;
//   - reading what a confined process was denied from its output
//     (Denials): each path or port counted, also a connection failure to
//     an endpoint it is configured to reach that its ports refuse, and
//     since it last made progress, so that a caller can tell a process
//     stuck on a refusal (Stuck) from one that tried once and moved on;
//     bounded whatever it prints.
//
// It must not know about attempts, runtimes, git or NATS: callers say which
// paths and ports a process needs (internal/attempt builds an attempt's
// Policy) and start the process themselves (internal/supervise).
//
// docs/security.md says what Landlock cannot express.
package sandbox
