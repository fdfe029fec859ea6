// Package scope checks what an attempt changed against what it was allowed
// to change: the task's scope (paths relative to the repo root), symlinks
// that lead out of the worktree, and — with a Guard — git's internals and
// files outside the worktree, which no diff of the worktree shows.
//
// Violations are human-readable strings, "path: reason", for the report.
// It reads the changes package checkout observed and the scope of package
// flow; it must not know what a violation leads to (package attempt fails
// the attempt) nor how the agent ran.
package scope
