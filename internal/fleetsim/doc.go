// Package fleetsim simulates a fleet of workers against a real controller:
// what `bin/fleetsim` (cmd/fleetsim) runs to measure the controller's cost
// per task at fleet size (docs/benchmarks.md, the fleet).
//
// It owns the simulated runtime — what each attempt does instead of
// running a CLI, a deterministic function of a seed, the task and the run
// (Mix): how long it takes, whether it succeeds, fails, meets a rate limit
// or hangs until cancelled, how much output it writes — and the Runner
// that plays it behind package worker's Runner seam, so that everything
// else a worker does is the real worker's: its registration and
// heartbeats, its claims with their leases and epochs, its events and
// report, its obedience to cancel signals. It also owns the fleet of such
// workers in one process (Fleet), the flows the simulator submits, the
// record of every simulated run (Ledger), the check of the outcome against
// what the runtimes dictated (Check), and the controller process it starts
// when given no NATS URL (Process).
//
// It must not know the controller's decisions: it submits flows, plays
// the workers' part and reads the event log, as an operator's tools would.
// It runs no git and no process of an attempt's.
package fleetsim
