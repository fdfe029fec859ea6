// Package attempt drives one attempt through its lifecycle:
// Initialize → Prepare → Execute → Observe → Terminate → Report
// (docs/design.md#one-attempt). It joins a runtime (what to run, package
// adapter's contract), a checkout of the repo cache (where) and the
// sandbox (within what), and tells what happened through an Emitter, as
// package event's payloads. Every runtime, a CLI or the native runtime
// alike, is run the same way: execute starts its task, stops it through
// its handle and judges its Exit; nothing here asks what kind it is.
// Runner.Run calls one method per phase in order (attempt.go); each
// returns its error, and the report is assembled from what they found
// (report.go). It also builds a flow's integration branch (Integrate) and
// sweeps the worker's work dir (Sweep).
//
// Execute reads the task's output while it runs (output.go), through the
// runtime's parser when it has one (adapter.OutputReader): the parser's
// verdict, judged by adapter.StopOn, stops the process group at refused
// credentials or a rate limit the CLI gave up on, and after the runtime's
// own_retry_timeout of the CLI's own retries of either, so that the task's
// fallback need not wait for minutes of them. Confined, each line also goes
// to the sandbox's reader of denials (denied.go): a CLI stuck on what the
// sandbox refuses it — the same port or path refused again, nothing else
// done, no file changed, over own_retry_timeout — is stopped too, and one
// that fails right after a refusal with nothing done since is taken to
// have failed because of it: class SANDBOX_DENIED, naming what to open.
//
// After Observe come the checks, in this order:
//
//  1. an operator's cancel (Job.Cancel): the CLI's process group is stopped,
//     the changes are observed, nothing is pushed, class CANCELLED;
//  2. the scope (package scope): paths outside Job.Scope, symlinks leading
//     out of the worktree, changes to git's internals, files written beside
//     the worktree. Any violation: nothing is pushed, class SCOPE_VIOLATION;
//  3. the checkpoint commit; then, only if the CLI itself succeeded, the
//     verification commands (package verify) and, if they passed, the
//     validator's review (ReviewPrompt, ParseVerdict). A failure is class
//     VERIFICATION_FAILED; the branch is still pushed, for inspection, if
//     the CLI changed something. A CLI that failed pushes nothing. The
//     worktree is reset to the checkpoint afterwards, so nothing the checks
//     wrote is pushed, and the scope guard is asked again.
//
// verification_completed is emitted when checks ran (the task has Verify,
// Review or Scope and the CLI succeeded) or violations were found.
//
// Every process it starts — the CLI or the native runtime's commands, the
// verification commands, the validator's — runs confined when the Runner
// has a sandbox (sandbox.go builds each task's policy from what the
// runtime says its processes need, adapter.Needs); the report says how
// they ran and what the sandbox denied, as their output told.
//
// It must not know about NATS or claims: the worker gives it the job as
// queued (queue.Job, read as data) with its claim's epoch, an emitter and an
// output sink, and publishes the report it returns.
package attempt
