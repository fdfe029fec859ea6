package worker

import (
	"context"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/attempt"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Runner does the work of a claimed job, while the worker holds its claim:
// an attempt, or a flow's integration branch. The worker's own is
// *attempt.Runner (git, the CLI, the sandbox); cmd/fleetsim gives one that
// simulates the work (WithRunner), so that everything around it — the
// registry, claims and heartbeats, the events, the report, cancels — is
// this package's.
type Runner interface {
	// Run runs one attempt and returns its report, emitting its lifecycle
	// events on the way and its output to out; an error means no report:
	// the job goes back (attempt.Runner.Run).
	Run(ctx context.Context, job *attempt.Job, ad adapter.Adapter, emit attempt.Emitter, out attempt.OutputSink) (*event.Report, error)
	// Integrate builds a flow's integration branch (attempt.Runner.Integrate).
	Integrate(ctx context.Context, job *attempt.Job) (*event.FlowIntegratedData, error)
	// Sweep removes what finished runs left behind, while short says the
	// disk is short (nil: everything due).
	Sweep(ctx context.Context, short func() bool) error
}

var _ Runner = (*attempt.Runner)(nil)

// WithRunner has the worker run its claimed jobs with r instead of its own
// attempt.Runner: no repo cache is made, and no process is started.
func WithRunner(r Runner) Option {
	return func(o *options) { o.runner = r }
}
