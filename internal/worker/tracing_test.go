package worker

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/tracing"
)

// spanOfEvent records, for each event published, the span it was published in.
type spanOfEvent struct {
	spans map[event.Type]trace.SpanID
	fail  event.Type
}

func (s *spanOfEvent) Emit(ctx context.Context, typ event.Type, _ string, _ any) error {
	s.spans[typ] = trace.SpanFromContext(ctx).SpanContext().SpanID()
	if typ == s.fail {
		return errors.New("nats: timeout")
	}
	return nil
}

type phaseRun struct {
	t     *testing.T
	rec   *tracetest.SpanRecorder
	jt    *jobTrace
	ctx   context.Context
	inner *spanOfEvent
	em    *tracedEmitter
}

func newPhaseRun(t *testing.T, kind drovertype.JobKind) *phaseRun {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := tracing.NewProvider(1, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	job := &queue.Job{Flow: "f", Task: "t", Attempt: "f_t_1", N: 1, Kind: kind}
	ctx, proc := tp.Tracer("test").Start(context.Background(), "process drover.attempts.{pool}.{runtime}")
	jt := &jobTrace{tracer: tp.Tracer("test"), proc: proc, ctx: ctx, job: job, red: redact.FromEnv(nil, []string{"API_KEY=sekrit"}),
		ids: phaseIDs(job, "w1")}
	jt.open(phaseClaim)
	inner := &spanOfEvent{spans: map[event.Type]trace.SpanID{}}
	return &phaseRun{t: t, rec: rec, jt: jt, ctx: context.WithValue(ctx, jobTraceKey{}, jt), inner: inner,
		em: &tracedEmitter{jt: jt, inner: inner}}
}

func (r *phaseRun) emit(typ event.Type, data any) {
	r.t.Helper()
	_ = r.em.Emit(context.Background(), typ, "", data)
}

// spans ends the job and returns its phase spans by name, in order, after
// checking each is a child of the process span.
func (r *phaseRun) spans() ([]string, map[string]sdktrace.ReadOnlySpan) {
	r.t.Helper()
	r.jt.end()
	var names []string
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range r.rec.Ended() {
		byName[s.Name()] = s
		if s.SpanContext().SpanID() == r.jt.proc.SpanContext().SpanID() {
			continue
		}
		names = append(names, s.Name())
		if s.Parent().SpanID() != r.jt.proc.SpanContext().SpanID() {
			r.t.Errorf("%s is not a child of the process span", s.Name())
		}
		// The claim phase's worker is the one its event names.
		if attr(s, "drover.flow.id") != "f" || attr(s, "drover.attempt.id") != "f_t_1" || (s.Name() != "claim" && attr(s, "drover.worker.id") != "w1") {
			r.t.Errorf("%s does not name its flow, attempt and worker: %v", s.Name(), s.Attributes())
		}
	}
	return names, byName
}

// publishedIn checks that each event went out inside the named phase.
func (r *phaseRun) publishedIn(byName map[string]sdktrace.ReadOnlySpan, want map[event.Type]string) {
	r.t.Helper()
	for typ, phase := range want {
		if s := byName[phase]; s == nil || r.inner.spans[typ] != s.SpanContext().SpanID() {
			r.t.Errorf("%s was not published in the %s span", typ, phase)
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func TestPhasesOfACheckedAttempt(t *testing.T) {
	r := newPhaseRun(t, "")
	r.emit(event.AttemptClaimed, event.AttemptClaimedData{Worker: "w1"})
	r.emit(event.AdapterInitialized, event.AdapterInitializedData{Version: "1.0"})
	r.emit(event.PrepareCompleted, event.PrepareCompletedData{Branch: "drover/f/t/1"})
	r.emit(event.RuntimeStarted, event.RuntimeStartedData{Pid: 42})
	r.emit(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited"})
	r.emit(event.FileModified, event.FileModifiedData{Path: "a.txt"})
	r.emit(event.DiffComputed, event.DiffComputedData{Created: []string{"a.txt"}})
	r.emit(event.VerificationCompleted, &event.Verification{Passed: true})
	r.emit(event.CheckpointCommitCreated, event.CheckpointCommitCreatedData{Commit: "abc"})
	r.emit(event.RuntimeTerminated, struct{}{})
	r.emit(event.AttemptReported, &event.Report{Success: true, Commit: "abc"})

	names, spans := r.spans()
	want := []string{"claim", "initialize", "prepare", "execute", "observe", "verify", "report"}
	if !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	r.publishedIn(spans, map[event.Type]string{
		event.AttemptClaimed: "claim", event.AdapterInitialized: "initialize", event.PrepareCompleted: "prepare",
		event.RuntimeStarted: "execute", event.RuntimeExited: "execute", event.FileModified: "observe",
		event.DiffComputed: "observe", event.VerificationCompleted: "verify",
		event.CheckpointCommitCreated: "report", event.AttemptReported: "report",
	})
	for _, s := range spans {
		if s.Status().Code == codes.Error {
			t.Errorf("%s failed in a successful attempt: %v", s.Name(), s.Status())
		}
	}
	if attr(spans["process drover.attempts.{pool}.{runtime}"], "drover.outcome") != "succeeded" || attr(spans["observe"], "drover.files.created") != "1" {
		t.Error("outcome or observation not recorded")
	}
}

func TestPhasesOfAFailedCLI(t *testing.T) {
	r := newPhaseRun(t, "")
	r.emit(event.AttemptClaimed, event.AttemptClaimedData{})
	r.emit(event.AdapterInitialized, event.AdapterInitializedData{})
	r.emit(event.PrepareCompleted, event.PrepareCompletedData{})
	r.emit(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited", ExitCode: 3})
	r.emit(event.DiffComputed, event.DiffComputedData{})
	r.emit(event.RuntimeTerminated, struct{}{})
	r.emit(event.AttemptReported, &event.Report{Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Message: "fatal: token sekrit refused"}})

	names, spans := r.spans()
	if want := []string{"claim", "initialize", "prepare", "execute", "observe", "report"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v (no verify: no checks ran)", names, want)
	}
	if st := spans["execute"].Status(); st.Code != codes.Error || attr(spans["execute"], "drover.exit_code") != "3" {
		t.Errorf("execute: %v, exit code %q", st, attr(spans["execute"], "drover.exit_code"))
	}
	for _, name := range []string{"report", "process drover.attempts.{pool}.{runtime}"} {
		s := spans[name]
		if s.Status().Code != codes.Error || attr(s, "error.type") != "RUNTIME_ERROR" {
			t.Errorf("%s: status %v, error.type %q; want the report's class", name, s.Status(), attr(s, "error.type"))
		}
		if msg := attr(s, "drover.error.message"); msg != "fatal: token [REDACTED] refused" {
			t.Errorf("%s: message %q, want it masked", name, msg)
		}
	}
}

func TestPhasesOfAFailedVerification(t *testing.T) {
	r := newPhaseRun(t, "")
	for _, typ := range []event.Type{event.AttemptClaimed, event.AdapterInitialized, event.PrepareCompleted} {
		r.emit(typ, nil)
	}
	r.emit(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited"})
	r.emit(event.DiffComputed, event.DiffComputedData{})
	r.emit(event.VerificationCompleted, &event.Verification{Commands: []event.CommandResult{{Command: "true"}, {Command: "go test ./...", ExitCode: 1}}})
	r.emit(event.AttemptReported, &event.Report{Error: &event.ErrorInfo{Class: "VERIFICATION_FAILED", Message: "`go test ./...` exited 1"}})

	_, spans := r.spans()
	v := spans["verify"]
	if v == nil || v.Status().Code != codes.Error || attr(v, "error.type") != "VERIFICATION_FAILED" || attr(v, "drover.error.message") != "`go test ./...` exited 1" {
		t.Fatalf("verify span: %v", v)
	}
}

// TestPhasesOfAnEarlyFailure: Initialize fails, the report comes next; the
// initialize span carries the error.
func TestPhasesOfAnEarlyFailure(t *testing.T) {
	r := newPhaseRun(t, "")
	r.emit(event.AttemptClaimed, event.AttemptClaimedData{})
	r.emit(event.AttemptReported, &event.Report{Error: &event.ErrorInfo{Class: "RUNTIME_CONNECTION_FAILED", Message: "no binary"}})
	names, spans := r.spans()
	if want := []string{"claim", "initialize", "report"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	if attr(spans["initialize"], "error.type") != "RUNTIME_CONNECTION_FAILED" {
		t.Errorf("initialize span does not say why: %v", spans["initialize"].Attributes())
	}
	r.publishedIn(spans, map[event.Type]string{event.AttemptReported: "report"})
}

func TestPhasesOfAHandBack(t *testing.T) {
	r := newPhaseRun(t, "")
	r.inner.fail = event.PrepareCompleted
	r.emit(event.AttemptClaimed, event.AttemptClaimedData{})
	r.emit(event.AdapterInitialized, event.AdapterInitializedData{})
	r.emit(event.PrepareCompleted, event.PrepareCompletedData{})
	handedBack(r.ctx, ErrShutdown)
	names, spans := r.spans()
	if want := []string{"claim", "initialize", "prepare"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	for _, name := range []string{"prepare", "process drover.attempts.{pool}.{runtime}"} {
		if st := spans[name].Status(); st.Code != codes.Error || st.Description != "handed back: worker: shutting down" {
			t.Errorf("%s: %v", name, st)
		}
	}
}

func TestPhasesOfAnIntegration(t *testing.T) {
	r := newPhaseRun(t, drovertype.JobIntegrate)
	r.emit(event.AttemptClaimed, event.AttemptClaimedData{})
	r.emit(event.FlowIntegrated, &event.FlowIntegratedData{Error: &event.ErrorInfo{Class: "MERGE_CONFLICT", Message: "a.txt"}})
	names, spans := r.spans()
	if want := []string{"claim", "integrate", "report"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	if attr(spans["integrate"], "error.type") != "MERGE_CONFLICT" || attr(spans["report"], "error.type") != "MERGE_CONFLICT" {
		t.Error("the merge conflict is not on the integrate and report spans")
	}
}

func TestTracingOffWrapsNothing(t *testing.T) {
	var jt *jobTrace
	em := &emitter{}
	if got, ok := jt.wrap(em).(*emitter); !ok || got != em {
		t.Error("tracing off: the emitter was wrapped")
	}
	jt.end()
	claimResult(context.Background(), "held")
	handedBack(context.Background(), ErrShutdown)
}
