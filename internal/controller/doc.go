// Package controller is Drover's brain: it folds the EVENTS stream into the
// projection (package projection, kept by package store), derives decisions
// from the folded state — schedule ready tasks, classify failures and ask
// package policy what follows, fail and block, cancel, cool down what a
// rate limit concerns across the fleet and probe it (cooldown.go), end the
// tasks a budget no longer covers (budget.go), have a worker build the
// integration branch, complete flows — and records each decision as an
// event with a deterministic id, so that a restarted controller re-derives
// them without doubling anything. It declares attempts lost whose claim
// nobody renews (leases.go), sends the flow, task and attempt spans when
// they end (tracing.go), and answers the operator API over NATS
// request/reply (ServeAPI; Client is its caller's side). Serve runs it all
// as the daemon, with the nats-server it embeds when none is configured.
//
// It must not know how attempts run: it never imports the adapter, the
// attempt lifecycle, the worker or the CLIs' output; a job carries what a
// worker needs, and the worker's events bring back what happened.
package controller
