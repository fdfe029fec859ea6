package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/tracing"
)

// The controller's part of a flow's trace (see package tracing):
//
//   - every folded event that carries a trace context gets a process span,
//     a child of the span that published it (a worker's phase, a decision,
//     an API request);
//   - when the fold ends an attempt, a task or the flow, the controller
//     emits that span, with the derived ids everything else already points
//     at, its start and end times from the folded state, and a link to the
//     process span of the event that ended it.
//
// Nothing is held open between events, so a restart loses nothing but the
// spans still in the exporter's queue. An ending span is sent only once the
// fold that ended it is committed: a controller that crashes before the
// commit refolds the event and sends the span then, and one that crashes
// after it does not fold the event again, so no span is sent twice. (A
// controller whose store is lost refolds the whole log and sends every
// ending span again; nothing can tell it which it sent.)
//
// An operator retry reopens a task that ended, and its flow, and they end
// again later: each end is its own span, with an id of its own (package
// tracing, ids.go). A task's run in round r (projection.Task.Round) is
// TaskRoundSpanID(r), and its attempts are children of it; a task that
// ended blocked (it never ran) is BlockedTaskSpanID in the flow's round.
// The flow's root span, FlowSpanID, is sent when the flow's first round
// ends: at its completion, or at a retry folded while it still ran. A
// completion in a later round r is FlowRoundSpanID(r), a child of the root,
// from the submission to that end.

// traceFold starts tracing the fold of one message and returns what to call
// once it is staged. Off, or for a message already folded, it does nothing.
func (c *Controller) traceFold(ctx context.Context, msg jetstream.Msg, seq uint64) (done func()) {
	if !tracing.Enabled() || seq <= c.store.Applied() {
		return func() {}
	}
	flowID, typ := queue.ParseEventSubject(msg.Subject())
	id := queue.IDOfMsgID(msg.Headers().Get(jetstream.MsgIDHeader))
	pctx, span := tracing.StartProcess(ctx, msg.Headers(), tracing.Message{
		Subject: msg.Subject(), Template: queue.EventsTemplate, Destination: queue.EventDestination(typ), ID: id, BodySize: len(msg.Data()),
	}, tracing.Owner{}, tracing.KeyFlow.String(flowID), tracing.KeyEventType.String(typ), tracing.KeyEventSeq.Int64(int64(seq)))
	before := c.openWork(flowID)
	return func() {
		var ended []endedSpan
		c.store.Read(func(st *projection.State) {
			if p := st.Poisons[seq]; p != nil {
				span.SetStatus(codes.Error, "poison: "+p.Reason)
			} else if id != "" && st.Seen[id] != seq {
				span.SetAttributes(tracing.KeyDuplicate.Bool(true)) // folded before: changed nothing
			}
			ended = before.ended(st, &c.open, func() time.Time {
				if md, err := msg.Metadata(); err == nil {
					return md.Timestamp
				}
				return c.now()
			})
		})
		var links []trace.Link
		if sc := span.SpanContext(); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
		for _, e := range ended {
			c.ended = append(c.ended, func() { e(pctx, tracing.Tracer(), links) })
		}
		span.End()
	}
}

// sendEnded sends the spans of what the fold ended, once the fold is
// committed. Only the fold's goroutine calls it, and traceFold.
func (c *Controller) sendEnded() {
	for _, send := range c.ended {
		send()
	}
	clear(c.ended) // the closures hold copies of state
	c.ended = c.ended[:0]
}

// openWork is what of a flow had not ended before an event was folded.
type openWork struct {
	flowID string
	flow   bool
	round  int // the flow's
}

func (c *Controller) openWork(flowID string) *openWork {
	w := &openWork{flowID: flowID}
	if !c.open.hooked {
		c.store.OnMark(c.open.mark)
		c.open.hooked = true
	}
	c.store.Read(func(st *projection.State) {
		f := st.Flows[flowID]
		if f == nil {
			return
		}
		w.flow, w.round = !f.State.Terminal(), f.Round
		c.open.read(st, f)
	})
	c.open.marked = c.open.marked[:0]
	return w
}

// openTracker is what the tracer knows to be open (not ended) of the flows
// it traces: their tasks (by key in projection.State.Tasks) and their
// current attempts. A flow's are read from the projection at its first
// traced event; after that, the records each event changes keep them up
// to date (the fold names them: projection.State.OnMark). Tracing an event
// so costs what the event changed. (Walking the flow before and after each
// event made the fold of a flow of n tasks cost n² with tracing on.) Only
// the fold's goroutine uses it.
type openTracker struct {
	hooked   bool
	flows    map[string]bool     // flows read in
	tasks    map[string]struct{} // open tasks
	attempts map[string]struct{} // open current attempts
	marked   []string            // records the event being folded changed
}

// reset forgets what was read in, for a fold that starts again: it is read
// in anew from the projection.
func (o *openTracker) reset() {
	o.flows, o.tasks, o.attempts = map[string]bool{}, map[string]struct{}{}, map[string]struct{}{}
	o.marked = o.marked[:0]
}

func (o *openTracker) mark(key string) { o.marked = append(o.marked, key) }

// read reads in what of f is open, once. Call under the store's read lock,
// in a fold (which resets the tracker first).
func (o *openTracker) read(st *projection.State, f *projection.Flow) {
	if o.flows[f.ID] {
		return
	}
	o.flows[f.ID] = true
	for _, t := range st.OrderedTasks(f) {
		if !t.State.Terminal() {
			o.tasks[projection.TaskKey(f.ID, t.ID)] = struct{}{}
		}
		// An attempt ends by an event about itself, and only the task's
		// current one is open.
		if a := st.Attempts[t.Attempt]; a != nil && !a.State.Terminal() {
			o.attempts[a.ID] = struct{}{}
		}
	}
}

// changed lists the spans of what the records the event changed ended,
// and keeps up what is open.
func (o *openTracker) changed(st *projection.State) []endedSpan {
	var out []endedSpan
	for _, key := range o.marked {
		if id, ok := projection.AttemptOfRecord(key); ok {
			out = o.attemptChanged(st, id, out)
		} else if k, ok := projection.TaskOfRecord(key); ok {
			out = o.taskChanged(st, k, out)
		}
	}
	o.marked = o.marked[:0]
	return out
}

func (o *openTracker) attemptChanged(st *projection.State, id string, out []endedSpan) []endedSpan {
	a := st.Attempts[id]
	if a == nil || !o.flows[a.Flow] {
		return out
	}
	t := st.Task(a.Flow, a.Task)
	if !a.State.Terminal() {
		if t != nil && t.Attempt == id {
			o.attempts[id] = struct{}{}
		}
		return out
	}
	if _, open := o.attempts[id]; !open {
		return out
	}
	delete(o.attempts, id)
	round := 0 // an attempt runs within its task's round: a retry waits for it to end
	if t != nil {
		round = t.Round
	}
	return append(out, attemptSpan(*a, round))
}

func (o *openTracker) taskChanged(st *projection.State, key string, out []endedSpan) []endedSpan {
	t := st.Tasks[key]
	if t == nil || !o.flows[t.Flow] {
		return out
	}
	if !t.State.Terminal() {
		o.tasks[key] = struct{}{}
		return out
	}
	f := st.Flows[t.Flow]
	if _, open := o.tasks[key]; !open || f == nil {
		return out
	}
	delete(o.tasks, key)
	if t.State == drovertype.TaskBlocked {
		return append(out, blockedSpan(*t, f.SubmittedAt, f.Round))
	}
	start := f.SubmittedAt // a task that never ran waited from the submission
	if a1 := st.Attempts[drovertype.AttemptID(f.ID, t.ID, t.RetryBase+1)]; a1 != nil {
		start = a1.ScheduledAt // the round's first attempt
	}
	return append(out, taskSpan(*t, start))
}

// endedSpan emits one span the fold ended.
type endedSpan func(ctx context.Context, tr trace.Tracer, links []trace.Link)

// ended lists the spans of what was open before and has ended now; at is
// when the event was stored. The emitters copy what they need from st:
// they run after the read lock.
func (w *openWork) ended(st *projection.State, o *openTracker, at func() time.Time) []endedSpan {
	out := o.changed(st)
	f := st.Flows[w.flowID]
	if f == nil {
		return out
	}
	switch {
	case w.flow && f.State.Terminal():
		var failed []string
		for _, t := range st.FlowTasks(f) {
			if t.State != drovertype.TaskSucceeded {
				failed = append(failed, t.ID+" "+string(t.State))
			}
		}
		out = append(out, flowSpan(*f, len(f.Order), failed, time.Time{}))
	case w.flow && w.round == 0 && f.Round > 0:
		// Retried before it completed: its first round ends here.
		out = append(out, flowSpan(*f, len(f.Order), nil, at()))
	}
	return out
}

func attemptSpan(a projection.Attempt, taskRound int) endedSpan {
	return func(ctx context.Context, tr trace.Tracer, links []trace.Link) {
		attrs := []attribute.KeyValue{
			tracing.KeyFlow.String(a.Flow), tracing.KeyTask.String(a.Task), tracing.KeyAttempt.String(a.ID),
			tracing.KeyAttemptN.Int(a.N), tracing.KeyRuntime.String(a.Runtime), tracing.KeyPool.String(a.Pool),
			tracing.KeyState.String(string(a.State)), tracing.KeyBranch.String(a.Branch),
		}
		if a.Model != "" {
			attrs = append(attrs, tracing.KeyModel.String(a.Model))
		}
		if a.Worker != "" {
			attrs = append(attrs, tracing.KeyWorker.String(a.Worker), tracing.KeyEpoch.Int64(int64(a.Epoch)))
		}
		e := a.Error
		if r := a.Report; r != nil {
			attrs = append(attrs, tracing.KeyExitCode.Int(r.ExitCode), attribute.Int64("drover.attempt.duration_ms", r.DurationMS))
			if r.Commit != "" {
				attrs = append(attrs, tracing.KeyCommit.String(r.Commit))
			}
			attrs = append(attrs, usageAttrs(r.Usage)...)
			if r.Error != nil {
				e = r.Error
			}
		}
		_, span := tracing.StartAttempt(ctx, tr, a.Flow, a.Task, taskRound, a.ID, trace.WithTimestamp(a.ScheduledAt),
			trace.WithLinks(links...), trace.WithAttributes(attrs...))
		span.SetName(fmt.Sprintf("attempt %d", a.N))
		if a.State == drovertype.AttemptFailed {
			if e == nil {
				e = &event.ErrorInfo{Class: drovertype.ClassUnknown, Message: "the attempt failed without an error"}
			}
			if e.Category != "" {
				span.SetAttributes(tracing.KeyErrorCategory.String(string(e.Category)))
			}
			tracing.Fail(span, string(e.Class), e.Message)
		}
		span.End(trace.WithTimestamp(endAt(a.EndedAt, a.ScheduledAt)))
	}
}

func taskSpan(t projection.Task, start time.Time) endedSpan {
	return func(ctx context.Context, tr trace.Tracer, links []trace.Link) {
		_, span := tracing.StartTask(ctx, tr, t.Flow, t.ID, t.Round, trace.WithTimestamp(start),
			trace.WithLinks(links...), trace.WithAttributes(taskAttrs(t)...))
		name := "task " + t.ID
		if t.Round > 0 {
			name = fmt.Sprintf("task %s (round %d)", t.ID, t.Round)
		}
		span.SetName(name)
		switch {
		case t.State == drovertype.TaskSucceeded:
		case t.Error != nil:
			tracing.Fail(span, string(t.Error.Class), t.Error.Message)
		default:
			tracing.Fail(span, strings.ToUpper(string(t.State)), "")
		}
		span.End(trace.WithTimestamp(endAt(t.UpdatedAt, start)))
	}
}

// blockedSpan is a task that ended blocked, in the flow's round.
func blockedSpan(t projection.Task, start time.Time, flowRound int) endedSpan {
	return func(ctx context.Context, tr trace.Tracer, links []trace.Link) {
		_, span := tracing.StartBlockedTask(ctx, tr, t.Flow, t.ID, flowRound, trace.WithTimestamp(start),
			trace.WithLinks(links...), trace.WithAttributes(taskAttrs(t)...),
			trace.WithAttributes(attribute.Int("drover.flow.round", flowRound)))
		span.SetName("task " + t.ID + " (blocked)")
		tracing.Fail(span, "BLOCKED", "blocked by "+t.BlockedBy)
		span.End(trace.WithTimestamp(endAt(t.UpdatedAt, start)))
	}
}

func taskAttrs(t projection.Task) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		tracing.KeyFlow.String(t.Flow), tracing.KeyTask.String(t.ID), tracing.KeyState.String(string(t.State)),
		attribute.Int("drover.task.attempts", t.Attempts), tracing.KeyRuntime.String(t.Runtime), tracing.KeyRound.Int(t.Round),
	}
	if t.ResultBranch != "" {
		attrs = append(attrs, tracing.KeyBranch.String(t.ResultBranch), tracing.KeyCommit.String(t.ResultCommit))
	}
	if t.BlockedBy != "" {
		attrs = append(attrs, attribute.String("drover.task.blocked_by", t.BlockedBy))
	}
	return attrs
}

// flowSpan is the flow's span in its round: the root in round 0, else a
// child of it. A zero end is the completion; retried is when a retry ended
// a first round that had not completed.
func flowSpan(f projection.Flow, tasks int, failed []string, retried time.Time) endedSpan {
	return func(ctx context.Context, tr trace.Tracer, links []trace.Link) {
		round, end := f.Round, f.CompletedAt
		if !retried.IsZero() {
			round, end = 0, retried
		}
		attrs := []attribute.KeyValue{
			tracing.KeyFlow.String(f.ID), tracing.KeyFlowName.String(f.Spec.Name), tracing.KeyState.String(string(f.State)),
			tracing.KeyRound.Int(round), attribute.Int("drover.flow.tasks", tasks),
		}
		if in := f.Integration; in != nil {
			attrs = append(attrs, attribute.String("drover.flow.integration", in.Branch))
		}
		_, span := tracing.StartFlowRound(ctx, tr, f.ID, round, trace.WithTimestamp(f.SubmittedAt),
			trace.WithLinks(links...), trace.WithAttributes(attrs...))
		name := "flow " + f.Spec.Name
		if round > 0 {
			name = fmt.Sprintf("flow %s (round %d)", f.Spec.Name, round)
		}
		span.SetName(name)
		switch {
		case !retried.IsZero():
			span.SetAttributes(attribute.Bool("drover.flow.retried", true)) // running on in round 1
		case f.State == drovertype.FlowCancelled && f.Cancel != nil:
			span.SetStatus(codes.Error, "cancelled: "+f.Cancel.Reason)
		case f.State != drovertype.FlowSucceeded:
			msg := "flow " + string(f.State)
			if len(failed) > 0 {
				msg += ": " + strings.Join(failed, ", ")
			}
			span.SetStatus(codes.Error, msg)
		}
		span.End(trace.WithTimestamp(endAt(end, f.SubmittedAt)))
	}
}

// endAt is when something ended, never before it started.
func endAt(end, start time.Time) time.Time {
	if end.Before(start) {
		return start
	}
	return end
}

// usageAttrs are the token counts the attempt's CLI reported, by the
// OpenTelemetry GenAI names; a count it did not report is left out, since
// unknown is not 0.
func usageAttrs(u *event.Usage) []attribute.KeyValue {
	if u == nil {
		return nil
	}
	var attrs []attribute.KeyValue
	for _, c := range []struct {
		key string
		n   *int64
	}{
		{"gen_ai.usage.input_tokens", u.InputTokens}, {"gen_ai.usage.output_tokens", u.OutputTokens},
		{"gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens}, {"gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens},
	} {
		if c.n != nil {
			attrs = append(attrs, attribute.Int64(c.key, *c.n))
		}
	}
	return attrs
}
