package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/attempt"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/tracing"
)

// The phases of an attempt as spans. Each phase ends with the event named
// here; the next one starts at once. "verify" is only known to have run
// when verification_completed comes, so the span after observe starts as
// "report" and is renamed if the checks report first.
const (
	phaseClaim      = "claim"
	phaseInitialize = "initialize"
	phasePrepare    = "prepare"
	phaseExecute    = "execute"
	phaseObserve    = "observe"
	phaseVerify     = "verify"
	phaseReport     = "report"
	phaseIntegrate  = "integrate"
)

// phaseEndedBy is the phase each event ends.
var phaseEndedBy = map[event.Type]string{
	event.AttemptClaimed:        phaseClaim,
	event.AdapterInitialized:    phaseInitialize,
	event.PrepareCompleted:      phasePrepare,
	event.RuntimeExited:         phaseExecute,
	event.DiffComputed:          phaseObserve,
	event.VerificationCompleted: phaseVerify,
	event.AttemptReported:       phaseReport,
	event.FlowIntegrated:        phaseReport,
}

var phaseAfter = map[string]string{
	phaseClaim:      phaseInitialize,
	phaseInitialize: phasePrepare,
	phasePrepare:    phaseExecute,
	phaseExecute:    phaseObserve,
	phaseObserve:    phaseReport,
	phaseVerify:     phaseReport,
	phaseIntegrate:  phaseReport,
}

func final(typ event.Type) bool {
	return typ == event.AttemptReported || typ == event.FlowIntegrated
}

// jobTrace follows one delivered job in spans: the process span of the job
// message (a consumer span under the controller's publish span, itself
// under the attempt's span), and under it one span per phase. Each event
// the attempt emits is published inside the span of its phase, so the
// controller's fold of it continues from there. It sits around the
// emitter: package attempt knows nothing of it.
//
// A nil *jobTrace is tracing off: every method does nothing.
type jobTrace struct {
	tracer trace.Tracer
	proc   trace.Span
	ctx    context.Context // carries proc
	job    *queue.Job
	red    *redact.Redactor
	ids    []attribute.KeyValue // on every phase: the flow, task, attempt and worker

	mu       sync.Mutex
	phase    trace.Span // the open phase; nil once the report is out
	name     string
	events   int  // events published in the open phase
	reported bool // the final event went out
}

type jobTraceKey struct{}

// traceJob starts the process span of a delivered job and its claim phase.
// The returned context carries both the span and the jobTrace.
func (w *Worker) traceJob(ctx context.Context, msg jetstream.Msg, job *queue.Job) (context.Context, *jobTrace) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	m := tracing.Message{Subject: msg.Subject(), Template: queue.AttemptsTemplate, Destination: msg.Subject(), ID: job.Attempt, BodySize: len(msg.Data())}
	attrs := []attribute.KeyValue{
		tracing.KeyFlow.String(job.Flow), tracing.KeyAttempt.String(job.Attempt), tracing.KeyAttemptN.Int(job.N),
		tracing.KeyRuntime.String(job.Runtime), tracing.KeyPool.String(job.Pool), tracing.KeyWorker.String(w.cfg.Worker.ID),
	}
	if job.Task != "" {
		attrs = append(attrs, tracing.KeyTask.String(job.Task))
	}
	if job.Kind != drovertype.JobAttempt {
		attrs = append(attrs, tracing.KeyJobKind.String(string(job.Kind)))
	}
	if md, err := msg.Metadata(); err == nil {
		m.Consumer = md.Consumer
		attrs = append(attrs, tracing.KeyDelivery.Int64(int64(md.NumDelivered)))
	}
	// A job queued by a controller that did not trace continues the
	// attempt's derived span all the same.
	ctx, span := tracing.StartProcess(ctx, msg.Headers(), m, queue.JobOwner(job), attrs...)
	jt := &jobTrace{tracer: tracing.Tracer(), proc: span, ctx: ctx, job: job, red: w.red, ids: phaseIDs(job, w.cfg.Worker.ID)}
	jt.open(phaseClaim)
	return context.WithValue(ctx, jobTraceKey{}, jt), jt
}

// phaseIDs name a phase's flow, task, attempt and worker: a backend finds
// a flow's spans by drover.flow.id, and several workers in one process
// (controller dev) share its service.instance.id.
func phaseIDs(job *queue.Job, worker string) []attribute.KeyValue {
	ids := []attribute.KeyValue{tracing.KeyFlow.String(job.Flow), tracing.KeyAttempt.String(job.Attempt), tracing.KeyWorker.String(worker)}
	if job.Task != "" {
		ids = append(ids, tracing.KeyTask.String(job.Task))
	}
	return ids
}

func jobTraceFrom(ctx context.Context) *jobTrace {
	jt, _ := ctx.Value(jobTraceKey{}).(*jobTrace)
	return jt
}

// wrap puts the phase spans around an emitter.
func (jt *jobTrace) wrap(em *emitter) attempt.Emitter {
	if jt == nil {
		return em
	}
	jt.proc.SetAttributes(tracing.KeyEpoch.Int64(int64(em.epoch)))
	return &tracedEmitter{jt: jt, inner: em}
}

// claimResult records what the claim found (claimed, held, finished, error).
func claimResult(ctx context.Context, result string) {
	jt := jobTraceFrom(ctx)
	if jt == nil {
		return
	}
	jt.mu.Lock()
	defer jt.mu.Unlock()
	jt.proc.SetAttributes(tracing.KeyClaim.String(result))
	if jt.phase != nil && jt.name == phaseClaim {
		jt.phase.SetAttributes(tracing.KeyClaim.String(result))
		if result == "error" {
			jt.phase.SetStatus(codes.Error, "the claim store failed")
		}
	}
}

// handedBack records why the job went back without a report, on the phase
// it stopped in and on the process span.
func handedBack(ctx context.Context, cause error) {
	jt := jobTraceFrom(ctx)
	if jt == nil {
		return
	}
	jt.mu.Lock()
	defer jt.mu.Unlock()
	msg := jt.red.String(fmt.Sprintf("handed back: %v", cause))
	if jt.phase != nil {
		jt.phase.RecordError(cause)
		jt.phase.SetStatus(codes.Error, msg)
	}
	jt.proc.SetStatus(codes.Error, msg)
}

// end ends whatever is open: the job is done with here.
func (jt *jobTrace) end() {
	if jt == nil {
		return
	}
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.phase != nil {
		jt.phase.End()
		jt.phase = nil
	}
	jt.proc.End()
}

func (jt *jobTrace) open(name string) {
	_, jt.phase = jt.tracer.Start(jt.ctx, name, trace.WithAttributes(jt.ids...))
	jt.name, jt.events = name, 0
}

func (jt *jobTrace) next() {
	jt.phase.End()
	jt.phase = nil
	after := phaseAfter[jt.name]
	if jt.name == phaseClaim && jt.job.Kind == drovertype.JobIntegrate {
		after = phaseIntegrate
	}
	if after != "" {
		jt.open(after)
	}
}

// tracedEmitter publishes each event inside the span of its phase.
type tracedEmitter struct {
	jt    *jobTrace
	inner attempt.Emitter
}

func (t *tracedEmitter) Emit(ctx context.Context, typ event.Type, key string, data any) error {
	span := t.jt.enter(typ, data)
	err := t.inner.Emit(trace.ContextWithSpan(ctx, span), typ, key, data)
	t.jt.leave(typ, data, err)
	return err
}

// EmitAll publishes the events inside the span of their phase, at once
// where the inner emitter can.
func (t *tracedEmitter) EmitAll(ctx context.Context, typ event.Type, events []attempt.Keyed) error {
	if len(events) == 0 {
		return nil
	}
	b, ok := t.inner.(attempt.BatchEmitter)
	if !ok {
		return attempt.EmitEach(ctx, t, typ, events)
	}
	last := events[len(events)-1].Data
	span := t.jt.enter(typ, last)
	err := b.EmitAll(trace.ContextWithSpan(ctx, span), typ, events)
	t.jt.leave(typ, last, err)
	return err
}

// enter returns the span an event is published in, first closing the phase
// an attempt gave up in when its result comes early.
func (jt *jobTrace) enter(typ event.Type, data any) trace.Span {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.phase == nil {
		return jt.proc
	}
	switch {
	case typ == event.VerificationCompleted && jt.name == phaseReport && jt.events == 0:
		jt.phase.SetName(phaseVerify)
		jt.name = phaseVerify
	case final(typ) && jt.name != phaseReport:
		// Initialize failed, say: the open phase is where the attempt
		// stopped, and carries its error.
		if class, msg, failed := outcome(data); failed {
			jt.fail(jt.phase, class, msg)
		}
		jt.phase.End()
		jt.open(phaseReport)
	}
	jt.events++
	return jt.phase
}

// leave annotates the phase with what the event says and ends the phase
// the event ends.
func (jt *jobTrace) leave(typ event.Type, data any, err error) {
	jt.mu.Lock()
	defer jt.mu.Unlock()
	if jt.phase == nil {
		return
	}
	if err != nil {
		// The job goes back (handedBack says why); the phase stays open
		// until end.
		jt.phase.RecordError(err)
		return
	}
	jt.annotate(typ, data)
	if phaseEndedBy[typ] != jt.name {
		return
	}
	if final(typ) {
		jt.reported = true
		jt.proc.SetAttributes(tracing.KeyOutcome.String("succeeded"))
		if class, msg, failed := outcome(data); failed {
			jt.proc.SetAttributes(tracing.KeyOutcome.String("failed"))
			jt.fail(jt.phase, class, msg)
			jt.fail(jt.proc, class, msg)
		}
		jt.phase.End()
		jt.phase = nil
		return
	}
	jt.next()
}

func (jt *jobTrace) fail(span trace.Span, class, msg string) {
	tracing.Fail(span, class, jt.red.String(msg))
}

// outcome reads a result's error class and message.
func outcome(data any) (class, msg string, failed bool) {
	var e *event.ErrorInfo
	switch d := data.(type) {
	case *event.Report:
		if d.Success {
			return "", "", false
		}
		e = d.Error
	case *event.FlowIntegratedData:
		if d.Error == nil {
			return "", "", false
		}
		e = d.Error
	default:
		return "", "", false
	}
	if e == nil {
		return string(drovertype.ClassUnknown), "the attempt failed without an error", true
	}
	return string(e.Class), e.Message, true
}

// annotate records on the open phase what an event says: versions, exit
// codes, what changed, what the checks found, the result.
func (jt *jobTrace) annotate(typ event.Type, data any) {
	s := jt.phase
	switch d := data.(type) {
	case event.AttemptClaimedData:
		s.SetAttributes(tracing.KeyWorker.String(d.Worker))
	case event.AdapterInitializedData:
		s.SetAttributes(attribute.String("drover.runtime.binary", d.Binary), attribute.String("drover.runtime.version", d.Version))
	case event.PrepareCompletedData:
		s.SetAttributes(tracing.KeyBranch.String(d.Branch), attribute.String("drover.base_commit", d.BaseCommit))
	case event.RuntimeStartedData:
		s.AddEvent(string(typ), trace.WithAttributes(attribute.Int("process.pid", d.Pid)))
	case event.RuntimeExitedData:
		s.SetAttributes(tracing.KeyExitCode.Int(d.ExitCode), attribute.String("drover.runtime.outcome", d.Outcome),
			attribute.Int64("drover.runtime.duration_ms", d.DurationMS))
		if d.Outcome != "exited" || d.ExitCode != 0 {
			desc := fmt.Sprintf("the CLI %s with exit code %d", d.Outcome, d.ExitCode)
			if d.Signal != "" {
				desc += " (" + d.Signal + ")"
			}
			s.SetStatus(codes.Error, desc)
		}
	case event.DiffComputedData:
		s.SetAttributes(attribute.Int("drover.files.created", len(d.Created)), attribute.Int("drover.files.modified", len(d.Modified)),
			attribute.Int("drover.files.deleted", len(d.Deleted)), attribute.Int("drover.diff.bytes", d.DiffBytes))
	case *event.Verification:
		if d != nil && !d.Passed {
			jt.failVerification(s, d)
		}
	case event.CheckpointCommitCreatedData:
		s.SetAttributes(tracing.KeyCommit.String(d.Commit))
		s.AddEvent(string(typ), trace.WithAttributes(tracing.KeyCommit.String(d.Commit)))
	case *event.Report:
		s.SetAttributes(tracing.KeyExitCode.Int(d.ExitCode), tracing.KeyCommit.String(d.Commit))
	case *event.FlowIntegratedData:
		s.SetAttributes(tracing.KeyBranch.String(d.Branch), tracing.KeyCommit.String(d.Commit))
	default:
		if typ == event.RuntimeTerminated {
			s.AddEvent(string(typ))
		}
	}
}

// failVerification says which check failed: the scope, a command, or the
// review.
func (jt *jobTrace) failVerification(s trace.Span, v *event.Verification) {
	if n := len(v.ScopeViolations); n > 0 {
		jt.fail(s, string(drovertype.ClassScopeViolation), fmt.Sprintf("%d change(s) out of scope, first: %s", n, v.ScopeViolations[0]))
		return
	}
	for _, c := range v.Commands {
		if c.ExitCode != 0 || c.TimedOut {
			what := fmt.Sprintf("exited %d", c.ExitCode)
			if c.TimedOut {
				what = "timed out"
			}
			jt.fail(s, string(drovertype.ClassVerificationFailed), fmt.Sprintf("`%s` %s", c.Command, what))
			return
		}
	}
	if r := v.Review; r != nil && !r.Passed {
		msg := fmt.Sprintf("review by %s: FAIL", r.Runtime)
		if r.Error != "" {
			msg += ": " + r.Error
		} else if len(r.Reasons) > 0 {
			msg += ": " + strings.Join(r.Reasons, "; ")
		}
		jt.fail(s, string(drovertype.ClassVerificationFailed), msg)
		return
	}
	jt.fail(s, string(drovertype.ClassVerificationFailed), "the checks did not pass")
}
