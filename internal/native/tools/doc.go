// Package tools is what the native runtime's model may do to an attempt's
// worktree: read a file (by line range), write one, edit one by exact
// replacement, list a directory, find files by glob, search their contents,
// and run a shell command.
//
// It owns confinement. Every path a model sends — relative to the worktree
// or absolute inside it — is resolved here, symlink by symlink, before
// anything is opened, and file operations then go through an os.Root of the
// worktree, so the kernel refuses what resolution missed. A path outside the
// worktree, into .git, through a symlink that leads out, or (for a change)
// outside the task's scope is refused: the model gets a tool error it can
// read, the caller gets a Refusal to record, and the operation never
// happens. Shell commands cannot be confined by path; they run in the
// worktree under package supervise, through the one Sandbox seam where the
// attempt's sandbox applies.
//
// It must not know about model providers, the agent loop, budgets or
// Drover's events: it takes a tool name and its JSON arguments and returns
// what the model should read.
package tools
