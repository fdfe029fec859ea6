package native

import (
	"context"
	"fmt"
	"io"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/transcript"
)

// Adapter is a native runtime as the attempt lifecycle sees it: an
// adapter.InProcess, whose Run is Runtime.Run with the attempt's input
// and a result in the adapter contract's terms. The worker holds it as
// any runtime; package attempt runs it in place of a CLI.
type Adapter struct {
	adapter.InProcessDefaults
	rt *Runtime
}

var (
	_ adapter.InProcess     = (*Adapter)(nil)
	_ adapter.HealthChecker = (*Adapter)(nil)
	_ adapter.Evaluator     = (*Adapter)(nil)
)

// NewAdapter builds a native runtime from its configuration (New) as an
// adapter.
func NewAdapter(name string, rt config.Runtime) (*Adapter, error) {
	r, err := New(name, rt)
	if err != nil {
		return nil, err
	}
	return AdapterOf(r), nil
}

// AdapterOf is r as an adapter (a runtime over a mock model, in tests).
func AdapterOf(r *Runtime) *Adapter { return &Adapter{rt: r} }

// Runtime is the runtime the adapter runs.
func (a *Adapter) Runtime() *Runtime { return a.rt }

// Name implements adapter.Adapter.
func (a *Adapter) Name() string { return a.rt.Name() }

// Initialize implements adapter.Adapter (Runtime.Initialize).
func (a *Adapter) Initialize(ctx context.Context) (*adapter.Info, error) { return a.rt.Initialize(ctx) }

// Check implements adapter.HealthChecker (Runtime.Check).
func (a *Adapter) Check(ctx context.Context) (*adapter.Info, error) { return a.rt.Check(ctx) }

// Capabilities implements adapter.Adapter.
func (a *Adapter) Capabilities() adapter.Capabilities { return a.rt.Capabilities() }

// Evaluate implements adapter.Evaluator.
func (a *Adapter) Evaluate(model string) adapter.Evaluation { return a.rt.Evaluate(model) }

// Argv implements adapter.InProcess.
func (a *Adapter) Argv(model string) []string { return a.rt.Argv(model) }

// Run implements adapter.InProcess: one attempt through the loop, its
// events written to out as JSON lines. An attempt's Args have no meaning
// here (there is no command line) and are refused.
func (a *Adapter) Run(ctx context.Context, in *adapter.RunInput, out io.Writer) (*adapter.RunResult, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: no input", ErrInput)
	}
	if len(in.Args) > 0 {
		return nil, fmt.Errorf("%w: a native runtime takes no arguments (got %q)", ErrInput, in.Args)
	}
	res, err := a.rt.Run(ctx, &Input{
		Prompt: in.Prompt, Worktree: in.Worktree, TempDir: in.TempDir, Scope: in.Scope, Env: in.Env,
		Timeout: in.Timeout, Model: in.Model, Sandbox: in.Confine,
	}, out)
	if err != nil {
		return nil, err
	}
	return a.result(res, in), nil
}

// result is res in the adapter contract's terms.
func (a *Adapter) result(res *Result, in *adapter.RunInput) *adapter.RunResult {
	out := &adapter.RunResult{
		Outcome: string(res.Outcome), Err: res.Error, StopCause: res.StopCause, FinalText: res.FinalText,
		Usage: a.usage(res),
		Turns: res.Turns, ToolCalls: res.ToolCalls, Env: a.rt.commandEnv(in.Env, in.TempDir), Credential: a.rt.Credential(),
		Started: res.Started, Ended: res.Ended, LogErr: res.LogErr,
	}
	for _, r := range res.Refusals {
		out.Refusals = append(out.Refusals, fmt.Sprintf("%s %s: %s", r.Tool, r.Path, r.Reason))
	}
	return out
}

// usage is a run's usage as a CLI's parser gives it: every count known,
// since the API states each turn's; the cost known only when the runtime
// has a price (Drover knows none of its own, and $0 would lie).
func (a *Adapter) usage(res *Result) transcript.Usage {
	u := res.Usage
	known := func(n int64) *int64 { return &n }
	out := transcript.Usage{Model: res.Model, InputTokens: known(u.InputTokens), OutputTokens: known(u.OutputTokens),
		CacheReadTokens: known(u.CacheReadTokens), CacheWriteTokens: known(u.CacheWriteTokens)}
	if a.rt.cfg.Price != (Price{}) {
		cost := res.CostUSD
		out.CostUSD = &cost
	}
	return out
}
