// Package attempt drives one attempt through the seed lifecycle:
// Initialize → Prepare → Execute → Observe → Terminate → Report. It joins an
// adapter (what to run), the worktree cache (where), and supervision (how),
// and tells what happened through an Emitter.
//
// It must not know about NATS or claims: the worker gives it a job, an
// emitter and an output sink, and publishes the report it returns.
package attempt
