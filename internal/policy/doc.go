// Package policy decides what runs a task and what happens when an attempt
// of it fails. It is pure: no I/O, no clock and no randomness of its own, so
// the controller can re-derive any decision after a restart and get the
// same answer. It must not know events, the projection or NATS: the
// controller hands it plain values (Layer, Failure) and records what it
// returns.
//
// # Resolution
//
// A task's runtimes, review switch, timeout, scope and retry policy come
// from up to four levels, highest priority first: the task, its flow, the
// flow's project, and the global defaults of the configuration; below them
// are the built-in defaults (DefaultRetry, no timeout, no scope, no
// review). Resolve takes one Layer per level and records in Resolved where
// each value came from.
//
//   - The worker runtime's name comes from the highest level naming one.
//     Its model and arguments come from the highest level at or above that
//     one which sets them: a model set below the level that chose the
//     runtime was meant for a different runtime and is ignored. A level may
//     set a model without naming a runtime, to change the model of the
//     runtime a lower level chose. The validator runtime follows the same
//     rule.
//   - Review, timeout and scope come from the highest level setting them;
//     a scope is taken whole, never merged with a lower level's.
//   - Retry fields resolve one by one: each comes from the highest level
//     setting it (flow.RetrySpec: nil or an empty list is unset), over
//     DefaultRetry.
//
// # Retry and fallback
//
// Decide turns a Failure into a Decision. A task has MaxAttempts attempts
// in all, across runtimes. A rate-limited runtime, or one refusing its
// credentials, is replaced at once by the next runtime of the fallback chain
// (the task's runtime followed by Retry.Fallback). Classes listed in
// RetryOn are retried on the same runtime after a delay: when the CLI
// said when its quota resets or how long to wait, that; otherwise an
// exponential backoff with jitter. Every delay is capped by MaxBackoff.
// CANCELLED and MERGE_CONFLICT are never retried.
//
// # Determinism
//
// Decide takes the current time and a seed as arguments. The jitter factor
// is a hash (FNV-1a) of the seed — the controller passes something stable
// such as the failed attempt's id — so a decision made again for the same
// failure gives the same delay, while different attempts spread out.
//
// Package policy/feedback composes the prompt of a retry from the failed
// attempt's report. It is a separate package because it reads reports
// (package event), which policy itself does not need to know.
//
// Resolved, Choice, Retry and Level are package plan's: their JSON form is
// what flow_submitted events carry, and the event schema must not depend
// on the package that decides. Policy names them as its own.
package policy
