// Package stub is the sandbox's re-exec step: the program a confined
// process is started as, between the worker's fork and the CLI's exec.
//
// internal/sandbox starts a confined process as the running binary
// (/proc/self/exe) with argv
//
//	[Name, PATH, ARGV0, ARGS...]
//
// and a Landlock ruleset on file descriptor 3. The step
//
//  1. drops every capability (bounding, ambient, inheritable, permitted,
//     effective): a worker running as root must not hand its agent
//     CAP_SYS_PTRACE (which reads the worker's /proc/PID/environ past
//     Landlock), CAP_MKNOD (a block device in the worktree is the whole
//     disk) or CAP_SYS_MODULE;
//  2. sets no_new_privs, so nothing it execs gains privileges back;
//  3. installs a seccomp filter (amd64, arm64) that refuses Multipath TCP
//     sockets, which Landlock's TCP rules do not cover, io_uring, whose
//     operations seccomp cannot see, and system calls of another ABI
//     (32-bit, x32), whose arguments it cannot read;
//  4. enforces the ruleset on itself, closes descriptor 3 and execs PATH
//     with argv [ARGV0, ARGS...] and its environment unchanged,
//
// so the CLI's first instruction already runs confined, and neither the
// ruleset nor anything about it reaches the CLI. Any failure exits 126
// (127 when PATH does not exist) with a message on stderr: the CLI never
// runs unconfined.
//
// It runs as early as the binary allows, because every package's init that
// runs before it is paid on every confined launch:
//
//   - built with cgo, a C constructor runs it before the Go runtime starts
//     (stub_cgo.go);
//   - without cgo, this package's init does, right after package syscall's,
//     before the heavy inits of the worker's dependencies (stub_linux.go);
//   - sandbox.Main at the top of a command's main is the last resort, for a
//     host where /proc/self/cmdline cannot be read.
//
// It must import nothing but runtime, syscall and unsafe: an import would
// have to be initialized before it.
package stub

// Name is argv[0] of the re-exec step. Nothing else starts a binary so.
const Name = "drover-sandbox-exec"

// RulesetFD is the descriptor the ruleset is handed over on.
const RulesetFD = 3

// Exit codes of a failed step, as a shell reports a command it cannot run.
const (
	ExitCannotRun = 126
	ExitNotFound  = 127
)
