package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/native/tools"
	"github.com/drover-dev/drover/internal/transcript"
)

// Adapter is a native runtime behind the runtime contract: Start runs one
// task through the loop (Runtime.Run) on a goroutine its handle owns, and
// the handle's Exit is the loop's Result in the contract's terms. It
// judges its own run (adapter.Defaults' Classify) and reads no CLI output.
type Adapter struct {
	adapter.Defaults
	rt *Runtime
}

var (
	_ adapter.Adapter       = (*Adapter)(nil)
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

// Start implements adapter.Adapter: the task's input checked (an attempt's
// Args have no meaning here, there is no command line), the sandbox asked
// for the shell the model's commands run in, then the loop started. Its
// events go to the task's Output as stdout, one call each, and to its Log.
func (a *Adapter) Start(ctx context.Context, t *adapter.Task) (adapter.Handle, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: no input", ErrInput)
	}
	if len(t.Args) > 0 {
		return nil, fmt.Errorf("%w: a native runtime takes no arguments (got %q)", ErrInput, t.Args)
	}
	in := &Input{
		Prompt: t.Prompt, Worktree: t.Worktree, TempDir: t.TempDir, Scope: t.Scope, Env: t.Env,
		Timeout: t.Timeout, Model: t.Model,
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	env := a.rt.commandEnv(t.Env, t.TempDir)
	if t.Confine != nil {
		// The model's commands may write the worktree and the task's
		// TMPDIR, as a CLI may.
		c, err := t.Confine(adapter.Needs{Exec: tools.Shell(), Env: env, Sandbox: adapter.Sandbox{Write: []string{t.TempDir}}})
		if err != nil {
			return nil, err
		}
		if c != nil {
			in.Sandbox = c
		}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	h := &handle{cancel: cancel, done: make(chan struct{}), status: adapter.Status{
		Argv: a.rt.Argv(t.Model), Env: env, Credential: a.rt.Credential(),
	}}
	out := &output{sink: t.Output, log: t.Log}
	go func() {
		defer close(h.done)
		defer cancel(nil)
		res, err := a.rt.Run(rctx, in, out)
		h.exit = a.exit(res, err, out)
	}()
	return h, nil
}

// handle is a native task's Handle: the goroutine running the loop, which
// Stop cancels with its cause.
type handle struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
	status adapter.Status
	exit   *adapter.Exit // set before done closes
}

var _ adapter.Handle = (*handle)(nil)

func (h *handle) Wait() *adapter.Exit {
	<-h.done
	return h.exit
}

// Stop cancels the run: the model call or the command in progress stops
// at once, and the run ends stopped with cause.
func (h *handle) Stop(cause error) { h.cancel(cause) }

// Inspect says what runs: no process (pid 0), the words Argv stands for
// it with, the environment of its commands, its key's fingerprint.
func (h *handle) Inspect() adapter.Status { return h.status }

// exit is a run's Result in the contract's terms. err is Run's, for an
// input that stopped being usable after Start checked it (its worktree
// removed meanwhile).
func (a *Adapter) exit(res *Result, err error, out *output) *adapter.Exit {
	if err != nil {
		return &adapter.Exit{Outcome: string(Failed), Stdout: out.headTail(),
			Err: &adapter.Error{Class: drovertype.ClassConnectionFailed, Category: drovertype.CategoryRuntime, Message: err.Error()}}
	}
	e := &adapter.Exit{
		Outcome: string(res.Outcome), Err: res.Error, StopCause: res.StopCause, FinalText: res.FinalText,
		Usage: a.usage(res), Turns: res.Turns, ToolCalls: res.ToolCalls,
		Started: res.Started, Ended: res.Ended, Stdout: out.headTail(), LogErr: errors.Join(res.LogErr, out.err()),
	}
	for _, r := range res.Refusals {
		e.Refusals = append(e.Refusals, fmt.Sprintf("%s %s: %s", r.Tool, r.Path, r.Reason))
	}
	return e
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
