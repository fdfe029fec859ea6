package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/tools"
)

// state is where the loop is. The transitions are:
//
//	init  → think              the tools are ready
//	think → act                the model answered with tool calls
//	think → think              the answer was cut at its token limit: go on
//	think → done               the model answered without tool calls, or a
//	                           budget, the provider or the caller ended it
//	act   → think              every call has its result
//	act   → done               the caller or a budget ended it mid-call
type state string

const (
	stateInit  state = "init"
	stateThink state = "think"
	stateAct   state = "act"
	stateDone  state = "done"
)

// maxCallsPerTurn bounds the tool calls run for one answer; the rest get
// an error result.
const maxCallsPerTurn = 64

// continuePrompt follows an answer cut at its token limit.
const continuePrompt = "Your last answer was cut off at the output token limit. Continue where you stopped; use tools if the next step needs them."

type loop struct {
	r     *Runtime
	in    *Input
	cfg   Config
	clock Clock
	ev    eventWriter

	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time
	// deadline is when the time budget or the timeout ends the attempt
	// (zero: never), by the loop's clock; budgetEnd and timeoutEnd are
	// each one's own.
	deadline, budgetEnd, timeoutEnd time.Time

	tools   *tools.Set
	defs    []model.ToolDef
	system  string
	model   string
	msgs    []model.Message
	spent   spent
	pending *model.Response

	res *Result
}

func newLoop(r *Runtime, in *Input, out io.Writer) *loop {
	l := &loop{r: r, in: in, cfg: r.cfg, clock: r.clock, ev: eventWriter{w: out}, model: in.Model}
	l.res = &Result{ToolCalls: map[string]int{}}
	return l
}

// run drives the state machine from init to done and returns the result.
func (l *loop) run(parent context.Context) *Result {
	l.ctx, l.cancel = context.WithCancelCause(parent)
	defer l.cancel(nil)
	l.start = l.clock.Now()
	l.res.Started = l.start
	for _, t := range []struct {
		d     time.Duration
		cause error
	}{{l.cfg.Budget.Time, ErrTimeBudget}, {l.timeout(), ErrTimeout}} {
		if t.d <= 0 {
			continue
		}
		end := l.start.Add(t.d)
		if l.deadline.IsZero() || end.Before(l.deadline) {
			l.deadline = end
		}
		if t.cause == ErrTimeBudget {
			l.budgetEnd = end
		} else {
			l.timeoutEnd = end
		}
		cause := t.cause
		stop := l.clock.AfterFunc(t.d, func() { l.cancel(cause) })
		defer stop()
	}
	defer func() {
		if l.tools != nil {
			l.tools.Close()
		}
	}()
	st := stateInit
	for st != stateDone {
		switch st {
		case stateInit:
			st = l.init()
		case stateThink:
			st = l.think()
		case stateAct:
			st = l.act()
		default:
			panic("native: unknown state " + string(st))
		}
	}
	return l.res
}

func (l *loop) timeout() time.Duration {
	if l.in.Timeout > 0 {
		return l.in.Timeout
	}
	return l.cfg.Timeout
}

// init opens the tools and writes the opening event.
func (l *loop) init() state {
	set, err := tools.New(tools.Config{
		Worktree: l.in.Worktree, Scope: l.in.Scope, Env: l.r.commandEnv(l.in.Env, l.in.TempDir), Sandbox: l.in.Sandbox,
		Limits: tools.Limits{CommandTimeout: l.cfg.CommandTimeout, Grace: l.cfg.Grace, Process: l.cfg.Limits},
	})
	if err != nil {
		return l.finish(Failed, &adapter.Error{Class: drovertype.ClassPrepareFailed, Category: drovertype.CategoryInfrastructure,
			Message: fmt.Sprintf("the tools cannot open the worktree: %v", err), Recoverable: true})
	}
	l.tools = set
	l.defs = set.Defs()
	l.system = systemPrompt(set.Dir(), l.in.Scope, l.cfg.Budget)
	l.msgs = []model.Message{{Role: model.User, Text: l.in.Prompt}}
	name := l.model
	if name == "" {
		name = l.cfg.Model
	}
	budget := l.cfg.Budget
	l.ev.write(&Event{Type: EventStarted, State: string(stateInit), Provider: l.cfg.Provider, Model: name, Tools: tools.Names(), Budget: &budget})
	return stateThink
}

// cause says why the run must end now, if it must: the context was
// cancelled, or a deadline has passed by the clock. The second covers the
// moment between a deadline and its timer firing, when a command cut by
// its own clamped timeout has already returned.
func (l *loop) cause() error {
	if c := context.Cause(l.ctx); c != nil {
		return c
	}
	now := l.clock.Now()
	switch {
	case !l.budgetEnd.IsZero() && !now.Before(l.budgetEnd):
		return ErrTimeBudget
	case !l.timeoutEnd.IsZero() && !now.Before(l.timeoutEnd):
		return ErrTimeout
	}
	return nil
}

// think asks the model for its next step.
func (l *loop) think() state {
	if cause := l.cause(); cause != nil {
		return l.stop(cause)
	}
	maxOut, err := l.cfg.Budget.canThink(l.spent, l.cfg.MaxTokens)
	if err != nil {
		return l.budgetSpent(err, "")
	}
	turn := l.spent.turns + 1
	req := &model.Request{Model: l.model, System: l.system, Messages: l.msgs, Tools: l.defs, MaxOutputTokens: maxOut}
	l.ev.write(&Event{Type: EventRequest, Turn: turn, State: string(stateThink), Messages: len(l.msgs), MaxOutputTokens: maxOut, Last: summary(l.msgs[len(l.msgs)-1])})
	resp, next := l.call(turn, req)
	if resp == nil {
		return next
	}
	l.spent.turns = turn
	l.spent.usage = l.spent.usage.Add(resp.Usage)
	if resp.Model != "" {
		l.res.Model = resp.Model
	}
	for i := range resp.ToolCalls {
		if resp.ToolCalls[i].ID == "" {
			// Some Chat Completions servers leave ids out; the reply
			// must name the call it answers.
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", turn, i)
		}
	}
	l.ev.write(responseEvent(turn, resp))
	if resp.Text != "" {
		l.res.FinalText = resp.Text
	}
	if cause := l.cause(); cause != nil {
		return l.stop(cause) // the answer came too late
	}
	if l.cfg.Budget.overspent(l.spent.usage) {
		return l.budgetSpent(ErrTokenBudget, "")
	}
	l.msgs = append(l.msgs, model.Message{Role: model.Assistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
	switch {
	case len(resp.ToolCalls) > 0:
		if l.cfg.Budget.lastTurn(l.spent) {
			return l.budgetSpent(ErrTurnBudget, "the model's last allowed answer still calls tools, whose results it could not read")
		}
		l.pending = resp
		return stateAct
	case resp.StopReason == model.StopMaxTokens:
		if l.cfg.Budget.lastTurn(l.spent) {
			return l.budgetSpent(ErrTurnBudget, "the model's last allowed answer was cut at its token limit")
		}
		l.msgs = append(l.msgs, model.Message{Role: model.User, Text: continuePrompt})
		return stateThink
	}
	return l.finish(Completed, nil)
}

// call makes one turn's model call, trying again after transient failures
// as configured. It returns the response, or nil and the state to go to.
func (l *loop) call(turn int, req *model.Request) (*model.Response, state) {
	for try := 1; ; try++ {
		t0 := l.clock.Now()
		resp, err := l.r.client.Turn(l.ctx, req)
		if err == nil {
			if resp == nil {
				resp = &model.Response{StopReason: model.StopEndTurn}
			}
			return resp, ""
		}
		if cause := context.Cause(l.ctx); cause != nil {
			return nil, l.stop(cause)
		}
		var me *model.Error
		if !errors.As(err, &me) {
			// A provider is meant to classify everything; what it did not
			// is most likely the network.
			me = &model.Error{Kind: model.KindTransient, Provider: l.cfg.Provider, Message: err.Error(), Err: err}
		}
		retry := me.Kind == model.KindTransient && try <= l.cfg.MaxRetries
		var wait time.Duration
		if retry {
			wait = min(max(l.cfg.RetryBackoff<<min(try-1, 20), me.RetryAfter), l.cfg.RetryMaxWait)
		}
		l.ev.write(&Event{Type: EventModelError, Turn: turn, State: string(stateThink), Try: try, Kind: me.Kind, Status: me.Status,
			ErrorType: me.Type, Message: clipMessage(me.Message), RetryAfterMS: me.RetryAfter.Milliseconds(), WaitMS: wait.Milliseconds(),
			DurationMS: l.clock.Now().Sub(t0).Milliseconds()})
		if !retry {
			return nil, l.modelFailed(me, try)
		}
		if err := l.clock.Sleep(l.ctx, wait); err != nil {
			return nil, l.stop(err)
		}
	}
}

// act runs the pending tool calls, in order, and hands their results to
// the model.
func (l *loop) act() state {
	calls := l.pending.ToolCalls
	turn := l.spent.turns
	results := make([]model.ToolResult, 0, len(calls))
	for i, c := range calls {
		if cause := l.cause(); cause != nil {
			return l.stop(cause)
		}
		l.ev.write(&Event{Type: EventToolCall, Turn: turn, State: string(stateAct), CallID: c.ID, Tool: c.Name, Input: boundedInput(c.Input)})
		var o tools.Outcome
		t0 := l.clock.Now()
		if i >= maxCallsPerTurn {
			o = tools.Outcome{Content: fmt.Sprintf("error: at most %d tool calls are run per answer; this one was not", maxCallsPerTurn), IsError: true}
		} else {
			ctx, cancel := l.callContext()
			o = l.tools.Call(ctx, c.Name, c.Input)
			cancel()
		}
		if cause := l.cause(); cause != nil {
			// The call was cut short by the end of the attempt; its
			// result would mislead the log.
			return l.stop(cause)
		}
		l.res.ToolCalls[c.Name]++
		if o.Command != nil {
			l.res.Commands++
		}
		if o.Refusal != nil {
			l.res.Refusals = append(l.res.Refusals, *o.Refusal)
		}
		l.res.Changed = append(l.res.Changed, o.Changed...)
		e := &Event{Type: EventToolResult, Turn: turn, State: string(stateAct), CallID: c.ID, Tool: c.Name,
			Output: headTail(o.Content, maxToolOutput), IsError: o.IsError, Refusal: o.Refusal,
			DurationMS: l.clock.Now().Sub(t0).Milliseconds()}
		if o.Command != nil {
			code := o.Command.ExitCode
			e.ExitCode = &code
		}
		l.ev.write(e)
		results = append(results, model.ToolResult{CallID: c.ID, Name: c.Name, Content: o.Content, IsError: o.IsError})
	}
	l.pending = nil
	l.msgs = append(l.msgs, model.Message{Role: model.User, ToolResults: results})
	return stateThink
}

// callContext bounds a tool call by the attempt's deadline, so that a
// command's own timeout never runs past it.
func (l *loop) callContext() (context.Context, context.CancelFunc) {
	if l.deadline.IsZero() {
		return l.ctx, func() {}
	}
	left := l.deadline.Sub(l.clock.Now())
	return context.WithDeadline(l.ctx, time.Now().Add(left))
}

// modelFailed ends the run on a model call that will not be retried.
func (l *loop) modelFailed(me *model.Error, tries int) state {
	msg := me.Error()
	if tries > 1 {
		msg = fmt.Sprintf("%s (after %d tries)", msg, tries)
	}
	e := &adapter.Error{Category: drovertype.CategoryRuntime, Message: msg, Status: me.Status, RetryAfter: me.RetryAfter, ResetAt: me.ResetAt}
	switch me.Kind {
	case model.KindRateLimited:
		e.Class, e.Recoverable = drovertype.ClassRateLimited, true
	case model.KindAuth:
		e.Class = drovertype.ClassAuthFailed
	case model.KindTransient:
		e.Class, e.Recoverable = drovertype.ClassConnectionFailed, true
	case model.KindMalformed:
		e.Class = drovertype.ClassOutputMalformed
	default:
		e.Class = drovertype.ClassRuntimeError
	}
	return l.finish(Failed, e)
}

// budgetSpent ends the run on an exhausted budget.
func (l *loop) budgetSpent(err error, why string) state {
	class := map[error]drovertype.ErrorClass{
		ErrTurnBudget: drovertype.ClassTurnBudgetExhausted, ErrTokenBudget: drovertype.ClassTokenBudgetExhausted,
		ErrTimeBudget: drovertype.ClassTimeBudgetExhausted,
	}[err]
	b, u := l.cfg.Budget, l.spent.usage
	msg := err.Error()
	switch err {
	case ErrTurnBudget:
		msg += fmt.Sprintf(": %d of %d turns", l.spent.turns, b.Turns)
	case ErrTokenBudget:
		msg += fmt.Sprintf(": used %d tokens (%d in, %d out); budget %s", u.Total(), u.AllInput(), u.OutputTokens, tokenBounds(b))
	case ErrTimeBudget:
		msg += fmt.Sprintf(": %s", b.Time)
	}
	if why != "" {
		msg += "; " + why
	}
	return l.finish(Failed, &adapter.Error{Class: class, Category: drovertype.CategoryRuntime, Message: msg})
}

func tokenBounds(b Budget) string {
	s := ""
	add := func(name string, v int64) {
		if v > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", name, v)
		}
	}
	add("total", b.Tokens)
	add("in", b.InputTokens)
	add("out", b.OutputTokens)
	return s
}

// stop ends the run on a cancelled context: the time budget, the
// attempt's timeout, or the caller.
func (l *loop) stop(cause error) state {
	switch {
	case errors.Is(cause, ErrTimeBudget):
		return l.budgetSpent(ErrTimeBudget, "")
	case errors.Is(cause, ErrTimeout):
		return l.finish(TimedOut, &adapter.Error{Class: drovertype.ClassTimeout, Category: drovertype.CategoryRuntime,
			Message: fmt.Sprintf("wall-clock timeout (%s)", l.timeout()), Recoverable: true})
	}
	l.res.StopCause = cause
	return l.finish(Stopped, &adapter.Error{Class: drovertype.ClassCancelled, Category: drovertype.CategoryRuntime, Message: fmt.Sprintf("stopped: %v", cause)})
}

// finish fills the result and writes the closing event.
func (l *loop) finish(o Outcome, e *adapter.Error) state {
	r := l.res
	r.Outcome, r.Error = o, e
	r.Turns, r.Usage = l.spent.turns, l.spent.usage
	r.CostUSD = l.cfg.Price.Cost(r.Usage)
	r.Ended = l.clock.Now()
	if r.Model == "" {
		r.Model = l.model
		if r.Model == "" {
			r.Model = l.cfg.Model
		}
	}
	ev := &Event{Type: EventFinished, State: string(stateDone), Outcome: o, Turns: r.Turns, Usage: &r.Usage, CostUSD: r.CostUSD,
		ToolCalls: r.ToolCalls, Refusals: len(r.Refusals), DurationMS: r.Duration().Milliseconds()}
	if e != nil {
		ev.Class, ev.Message = e.Class, clipMessage(e.Message)
	}
	l.ev.write(ev)
	r.LogErr = l.ev.err
	sort.Strings(r.Changed)
	r.Changed = compact(r.Changed)
	return stateDone
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func clipMessage(s string) string {
	if len(s) > 2048 {
		return s[:2048] + "…"
	}
	return s
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
