package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Derived ids. Each kind hashes a different prefix, so a task and an
// attempt can never share a span id, and every process, before or after a
// restart, computes the same ids from the same Drover ids.

// TraceID is the trace of a flow.
func TraceID(flowID string) trace.TraceID {
	sum := sha256.Sum256([]byte("drover/trace\x00" + flowID))
	var id trace.TraceID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[len(id)-1] = 1 // all zeros is "no trace"; 2^-128 away, but say so
	}
	return id
}

// FlowSpanID is the root span of a flow's trace.
func FlowSpanID(flowID string) trace.SpanID { return spanID("flow\x00" + flowID) }

// TaskSpanID is the span of one task, a child of its flow's.
func TaskSpanID(flowID, task string) trace.SpanID { return spanID("task\x00" + flowID + "\x00" + task) }

// AttemptSpanID is the span of one attempt, a child of its task's.
func AttemptSpanID(attempt string) trace.SpanID { return spanID("attempt\x00" + attempt) }

// An operator retry reopens a task that ended, and the flow with it, and
// each ends again later. A span sent twice with one id shows twice in a
// backend, so every end has a span id of its own (see doc.go). The ids
// above stay those of the first: round 0 below is TaskSpanID and
// FlowSpanID, and no process but the controller, which sends these spans,
// ever needs a round.

// TaskRoundSpanID is the span of a task's run in one of its rounds
// (projection.Task.Round: the operator retries of the task), a child of its
// flow's span: TaskSpanID for round 0.
func TaskRoundSpanID(flowID, task string, round int) trace.SpanID {
	if round == 0 {
		return TaskSpanID(flowID, task)
	}
	return spanID("task-round\x00" + flowID + "\x00" + task + "\x00" + strconv.Itoa(round))
}

// BlockedTaskSpanID is the span of a task that ended blocked, in the
// flow's round (projection.Flow.Round). A blocked task never ran; a retry
// upstream unblocks it and it runs in its own round 0, so that span cannot
// be TaskSpanID. Only a retry unblocks a task, and a retry starts a flow
// round: a task ends blocked at most once per flow round.
func BlockedTaskSpanID(flowID, task string, flowRound int) trace.SpanID {
	return spanID("task-blocked\x00" + flowID + "\x00" + task + "\x00" + strconv.Itoa(flowRound))
}

// FlowRoundSpanID is the span of a flow that ended in a round after its
// first (projection.Flow.Round > 0), a child of the flow's root span:
// FlowSpanID for round 0.
func FlowRoundSpanID(flowID string, round int) trace.SpanID {
	if round == 0 {
		return FlowSpanID(flowID)
	}
	return spanID("flow-round\x00" + flowID + "\x00" + strconv.Itoa(round))
}

func spanID(key string) trace.SpanID {
	sum := sha256.Sum256([]byte("drover/span\x00" + key))
	var id trace.SpanID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[len(id)-1] = 1
	}
	return id
}

// Owner names the Drover span something belongs to: the attempt's when
// Attempt is set (Task must be too), else the task's, else the flow's.
type Owner struct {
	Flow, Task, Attempt string
}

// SpanContext is the owner's derived span as a remote parent. It is marked
// sampled: the sampler decides again from the trace id (see Setup), which
// every process does alike. It is invalid when Flow is empty.
func (o Owner) SpanContext() trace.SpanContext {
	if o.Flow == "" {
		return trace.SpanContext{}
	}
	var sid trace.SpanID
	switch {
	case o.Attempt != "" && o.Task != "":
		sid = AttemptSpanID(o.Attempt)
	case o.Task != "":
		sid = TaskSpanID(o.Flow, o.Task)
	default:
		sid = FlowSpanID(o.Flow)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: TraceID(o.Flow), SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	})
}

// attrs are the owner's ids as span attributes.
func (o Owner) attrs() []attribute.KeyValue {
	if o.Flow == "" {
		return nil
	}
	a := []attribute.KeyValue{KeyFlow.String(o.Flow)}
	if o.Task != "" {
		a = append(a, KeyTask.String(o.Task))
	}
	if o.Attempt != "" {
		a = append(a, KeyAttempt.String(o.Attempt))
	}
	return a
}

// ContextWithOwner returns ctx with the owner's span as its remote parent.
func ContextWithOwner(ctx context.Context, o Owner) context.Context {
	sc := o.SpanContext()
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// StartFlow starts the root span of a flow's trace with its derived ids.
// Pass the real start time (trace.WithTimestamp) and end it with the real
// end time.
func StartFlow(ctx context.Context, tr trace.Tracer, flowID string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return startDerived(ctx, tr, "flow", trace.SpanContext{}, TraceID(flowID), FlowSpanID(flowID), opts)
}

// StartFlowRound starts the span of a flow's end in a round after its
// first, a child of the flow's root span (FlowRoundSpanID).
func StartFlowRound(ctx context.Context, tr trace.Tracer, flowID string, round int, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if round == 0 {
		return StartFlow(ctx, tr, flowID, opts...)
	}
	parent := Owner{Flow: flowID}.SpanContext()
	return startDerived(ctx, tr, "flow", parent, parent.TraceID(), FlowRoundSpanID(flowID, round), opts)
}

// StartTask starts the span of a task's run in its round, a child of its
// flow's span, with derived ids (TaskRoundSpanID).
func StartTask(ctx context.Context, tr trace.Tracer, flowID, task string, round int, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := Owner{Flow: flowID}.SpanContext()
	return startDerived(ctx, tr, "task", parent, parent.TraceID(), TaskRoundSpanID(flowID, task, round), opts)
}

// StartBlockedTask starts the span of a task that ended blocked in the
// flow's round, a child of its flow's span (BlockedTaskSpanID).
func StartBlockedTask(ctx context.Context, tr trace.Tracer, flowID, task string, flowRound int, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := Owner{Flow: flowID}.SpanContext()
	return startDerived(ctx, tr, "task", parent, parent.TraceID(), BlockedTaskSpanID(flowID, task, flowRound), opts)
}

// StartAttempt starts an attempt's span, a child of its task's span in the
// task's round (an attempt runs within one), with derived ids.
func StartAttempt(ctx context.Context, tr trace.Tracer, flowID, task string, taskRound int, attempt string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := Owner{Flow: flowID}.SpanContext()
	parent = parent.WithSpanID(TaskRoundSpanID(flowID, task, taskRound))
	return startDerived(ctx, tr, "attempt", parent, parent.TraceID(), AttemptSpanID(attempt), opts)
}

// startDerived starts a span whose ids the IDGenerator takes from the
// context. The wanted ids stay out of the returned context: a child started
// from it must get ids of its own.
func startDerived(ctx context.Context, tr trace.Tracer, name string, parent trace.SpanContext, tid trace.TraceID, sid trace.SpanID, opts []trace.SpanStartOption) (context.Context, trace.Span) {
	sctx := context.WithValue(ctx, wantKey{}, want{trace: tid, span: sid})
	if parent.IsValid() {
		sctx = trace.ContextWithRemoteSpanContext(sctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := tr.Start(sctx, name, opts...)
	return trace.ContextWithSpan(ctx, span), span
}

type wantKey struct{}

type want struct {
	trace trace.TraceID
	span  trace.SpanID
}

// IDGenerator gives a span the ids startDerived asked for and random ids to
// every other span. Install it with sdktrace.WithIDGenerator (Setup does).
type IDGenerator struct{}

// NewIDs returns the wanted trace and span id for a root span, else random ones.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if w, ok := ctx.Value(wantKey{}).(want); ok && w.trace.IsValid() && w.span.IsValid() {
		return w.trace, w.span
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID returns the wanted span id when it was asked for in this trace,
// else a random one.
func (IDGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if w, ok := ctx.Value(wantKey{}).(want); ok && w.trace == traceID && w.span.IsValid() {
		return w.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
