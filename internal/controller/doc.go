// Package controller is Drover's brain: it folds the EVENTS stream into the
// projection (package projection), derives decisions from the folded state —
// schedule ready tasks, classify failures, fail and block, complete flows —
// and records each decision as an event with a deterministic id, so that a
// restarted controller re-derives them without doubling anything. It also
// answers the operator API over NATS request/reply.
package controller
