package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/tracing"
	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

// TestTracing runs a flow through a controller and two worker processes
// that export spans to in-process OTLP receivers — the controller over
// OTLP/HTTP configured by Drover's keys, the workers over OTLP/gRPC
// configured by the standard OTEL_* variables alone — and checks the trace:
// one trace for the flow, the flow span at the root, tasks under it,
// attempts under their task, each worker's process and phase spans under
// the controller's publish of the job and so under the attempt, events
// going back under the phase that published them, messaging attributes on
// both ends, and the failed attempt's error class on its span.
func TestTracing(t *testing.T) {
	t.Parallel()
	ctlRcv, wrkRcv := tracingtest.NewHTTP(t), tracingtest.NewGRPC(t)
	const fast = "OTEL_BSP_SCHEDULE_DELAY=100" // export every 100ms, not every 5s
	c := startController(t, "DROVER_TRACING_EXPORTER=otlp", "DROVER_TRACING_ENDPOINT="+ctlRcv.URL(), fast)
	workerEnv := []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + wrkRcv.URL(), fast}
	c.startWorker("worker-1", 1, workerEnv...)
	c.startWorker("worker-2", 1, workerEnv...)
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: traced
repo: `+repo+`
base: main
runtime: demo
retry: {initial_backoff: 1s, max_backoff: 1s}
tasks:
  - id: ok
    prompt: |
      @write ok.txt fine
  - id: flaky
    verify: ["test -f fixed.txt || { echo VERIFY-MISSING-fixed.txt; exit 1; }"]
    prompt: |
      @on-attempt 1 @write wrong.txt not yet
      @after-attempt 1 @write fixed.txt fixed
`)
	out, errOut, code := c.cli("submit", flowFile, "--watch")
	if code != 0 {
		t.Fatalf("submit --watch: exit %d\n%s\n%s", code, out, errOut)
	}
	id := submittedID(t, out)
	attOK, flaky1, flaky2 := drovertype.AttemptID(id, "ok", 1), drovertype.AttemptID(id, "flaky", 1), drovertype.AttemptID(id, "flaky", 2)
	integration := drovertype.IntegrationID(id, 1)

	// Wait until every process has exported its last span of the flow: the
	// flow span (the controller's last) and the report phase of each of the
	// four jobs (each worker's last).
	var tr *traceTree
	t.Cleanup(func() {
		if t.Failed() && tr != nil {
			t.Log(tr)
		}
	})
	var elections []tracingtest.Span
	waitFor(t, 60*time.Second, "the flow's spans from every process, every parent among them", func() bool {
		var flowSpans []tracingtest.Span
		flowSpans, elections = splitElections(append(ctlRcv.Spans(), wrkRcv.Spans()...))
		tr = newTraceTree(flowSpans)
		return tr.named("flow traced") != nil && len(tr.all("report")) >= 4 && len(tr.orphans()) == 0
	})
	// The controller's election is a trace of its own: the span from
	// winning the lease to folding leader_elected, parent of its publish
	// and the fold's process span.
	if el := newTraceTree(elections); el.named("leader election") == nil || el.named("leader election").Attrs["drover.leader.epoch"] != "1" ||
		len(el.spans) != 3 || len(el.orphans()) != 0 {
		t.Errorf("the election's trace: %v", el)
	}
	tr.checkEverySpan(t, id, map[string][]string{"drover-worker": {"worker-1", "worker-2"}})

	// One trace, the flow's, derived from its id in every process.
	wantTrace := tracing.TraceID(id).String()
	for _, s := range tr.spans {
		if s.TraceID != wantTrace {
			t.Errorf("span %q of %s is in trace %s, not the flow's %s", s.Name, s.Service(), s.TraceID, wantTrace)
		}
	}
	flowSpan := tr.named("flow traced")
	if flowSpan.Parent != "" || flowSpan.SpanID != tracing.FlowSpanID(id).String() || flowSpan.Service() != "drover-controller" {
		t.Errorf("flow span: parent %q, id %s, service %s; want the root, %s, from the controller",
			flowSpan.Parent, flowSpan.SpanID, flowSpan.Service(), tracing.FlowSpanID(id))
	}
	for _, task := range []string{"ok", "flaky"} {
		s := tr.named("task " + task)
		if s == nil || s.Parent != flowSpan.SpanID || s.SpanID != tracing.TaskSpanID(id, task).String() {
			t.Errorf("task %s span %+v: want a child of the flow span", task, s)
		}
	}
	for _, a := range []string{attOK, flaky1, flaky2} {
		s := tr.byID[tracing.AttemptSpanID(a).String()]
		task := strings.Split(a, "_")[1]
		if s == nil || s.Parent != tracing.TaskSpanID(id, task).String() || s.Attrs["drover.attempt.id"] != a {
			t.Errorf("attempt %s span %+v: want a child of task %s's span", a, s, task)
		}
	}
	// The failed attempt says why, on the controller's attempt span and on
	// the worker's verify phase.
	if s := tr.byID[tracing.AttemptSpanID(flaky1).String()]; s == nil || !s.Error || s.Attrs["error.type"] != "VERIFICATION_FAILED" {
		t.Errorf("failed attempt %s: %+v, want error status and class VERIFICATION_FAILED", flaky1, s)
	}
	if s := tr.byID[tracing.AttemptSpanID(flaky2).String()]; s == nil || s.Error {
		t.Errorf("attempt %s succeeded, its span: %+v", flaky2, s)
	}

	// Each job: the controller's publish span under the attempt (the flow,
	// for the integration), the worker's process span under it, the phases
	// under that, all from a worker process.
	wantPhases := map[string][]string{
		attOK:       {"claim", "initialize", "prepare", "execute", "observe", "report"},
		flaky1:      {"claim", "initialize", "prepare", "execute", "observe", "verify", "report"},
		flaky2:      {"claim", "initialize", "prepare", "execute", "observe", "verify", "report"},
		integration: {"claim", "integrate", "report"},
	}
	for job, phases := range wantPhases {
		parent := tracing.AttemptSpanID(job).String()
		if job == integration {
			parent = flowSpan.SpanID
		}
		proc := tr.find(func(s *tracingtest.Span) bool {
			return s.Kind == tracepb.Span_SPAN_KIND_CONSUMER && s.Service() == "drover-worker" && s.Attrs["drover.attempt.id"] == job
		})
		if proc == nil {
			t.Errorf("%s: no worker process span", job)
			continue
		}
		pub := tr.byID[proc.Parent]
		if pub == nil || pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER || pub.Service() != "drover-controller" || pub.Parent != parent {
			t.Errorf("%s: the worker's process span's parent %+v is not the controller's publish span under %s", job, pub, parent)
			continue
		}
		for _, s := range []*tracingtest.Span{pub, proc} {
			op := map[tracepb.Span_SpanKind]string{tracepb.Span_SPAN_KIND_PRODUCER: "send", tracepb.Span_SPAN_KIND_CONSUMER: "process"}[s.Kind]
			if s.Attrs["messaging.system"] != "nats" || s.Attrs["messaging.operation.type"] != op ||
				s.Attrs["messaging.destination.name"] != "drover.attempts.default.demo" || s.Attrs["messaging.message.id"] != job {
				t.Errorf("%s: %s lacks the messaging attributes: %v", job, s.Name, s.Attrs)
			}
		}
		if proc.Attrs["messaging.consumer.group.name"] != "attempts_default_demo" {
			t.Errorf("%s: consumer %q", job, proc.Attrs["messaging.consumer.group.name"])
		}
		var got []string
		for _, ph := range tr.children(proc.SpanID) {
			if ph.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
				continue
			}
			got = append(got, ph.Name)
			if w := ph.Resource["service.instance.id"]; ph.Service() != "drover-worker" || (w != "worker-1" && w != "worker-2") {
				t.Errorf("%s: phase %s from %s %q, want a worker process", job, ph.Name, ph.Service(), w)
			}
		}
		if strings.Join(got, " ") != strings.Join(phases, " ") {
			t.Errorf("%s: phases %v, want %v", job, got, phases)
		}
	}
	verify1 := tr.find(func(s *tracingtest.Span) bool {
		return s.Name == "verify" && s.Attrs["drover.attempt.id"] == flaky1
	})
	if verify1 == nil || !verify1.Error || verify1.Attrs["error.type"] != "VERIFICATION_FAILED" ||
		!strings.Contains(verify1.Attrs["drover.error.message"], "test -f fixed.txt") {
		t.Errorf("verify phase of %s: %+v, want its failed command", flaky1, verify1)
	}

	// Events go back the same way: the worker publishes the report inside
	// its report phase, and the controller folds it in a process span under
	// that publish.
	for _, job := range []string{attOK, flaky1, flaky2} {
		fold := tr.find(func(s *tracingtest.Span) bool {
			return s.Service() == "drover-controller" && s.Kind == tracepb.Span_SPAN_KIND_CONSUMER &&
				s.Attrs["drover.event.type"] == "attempt_reported" && s.Attrs["messaging.message.id"] == "attempt_reported:"+job+":1"
		})
		if fold == nil {
			t.Errorf("%s: no controller span folding its report", job)
			continue
		}
		pub := tr.byID[fold.Parent]
		if pub == nil || pub.Service() != "drover-worker" || pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER ||
			pub.Attrs["messaging.destination.name"] != queue.EventSubject(id, "attempt_reported") {
			t.Errorf("%s: the report's fold span's parent %+v is not the worker's publish", job, pub)
			continue
		}
		if ph := tr.byID[pub.Parent]; ph == nil || ph.Name != "report" || ph.Attrs["drover.attempt.id"] != job {
			t.Errorf("%s: the report was not published in the report phase: %+v", job, ph)
		}
		// The attempt span links to the fold of the event that ended it.
		if a := tr.byID[tracing.AttemptSpanID(job).String()]; a == nil || len(a.Links) != 1 || a.Links[0] != fold.SpanID {
			t.Errorf("%s: attempt span links %v, want the fold of its report %s", job, a.Links, fold.SpanID)
		}
	}
}

// TestTracingAfterRetry runs a flow in `controller dev` (the controller
// and its workers in one process) that fails, retries its failed task with
// `controller retry`, and checks the whole trace: the spans of the first
// round and of the second each sent once (no span id twice, which a
// backend would show twice), the second round's task and flow spans under
// the flow's root, the retried attempt under its round's task span, every
// span with drover.flow.id and the process's service.instance.id, every
// parent in the trace. Exported over OTLP/gRPC to a receiver.
func TestTracingAfterRetry(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.NewGRPC(t)
	c := startDev(t, 1, "DROVER_TRACING_EXPORTER=otlp", "DROVER_TRACING_PROTOCOL=grpc", "DROVER_TRACING_ENDPOINT="+rcv.URL(),
		"OTEL_BSP_SCHEDULE_DELAY=100")
	repo := newRepo(t)
	flowFile := writeFlow(t, `name: again
repo: `+repo+`
base: main
runtime: demo
tasks:
  - id: flaky
    prompt: |
      @on-attempt 1 @exit 3
      @write flaky.txt ok
  - id: next
    depends_on: [flaky]
    prompt: "@write next.txt ok"
`)
	out, _, code := c.cli("submit", flowFile, "--watch")
	if code != 1 {
		t.Fatalf("submit: exit %d, want 1\n%s", code, out)
	}
	id := submittedID(t, out)
	if out, errOut, code := c.cli("retry", id+"/flaky"); code != 0 {
		t.Fatalf("retry: exit %d\n%s\n%s", code, out, errOut)
	}
	var tr *traceTree
	t.Cleanup(func() {
		if t.Failed() && tr != nil {
			t.Log(tr)
		}
	})
	waitFor(t, 90*time.Second, "the second round's flow span, every parent sent", func() bool {
		flowSpans, _ := splitElections(rcv.Spans())
		tr = newTraceTree(flowSpans)
		return tr.named("flow again (round 1)") != nil && len(tr.all("report")) >= 4 && len(tr.orphans()) == 0
	})
	tr.checkEverySpan(t, id, nil)
	flaky1, flaky2, next1 := drovertype.AttemptID(id, "flaky", 1), drovertype.AttemptID(id, "flaky", 2), drovertype.AttemptID(id, "next", 1)
	root := tr.byID[tracing.FlowSpanID(id).String()]
	if root == nil || root.Name != "flow again" || !root.Error || root.Parent != "" {
		t.Errorf("the root: %+v, want the first round's failure", root)
	}
	for _, want := range []struct{ name, span, parent string }{
		{"flow again (round 1)", tracing.FlowRoundSpanID(id, 1).String(), tracing.FlowSpanID(id).String()},
		{"task flaky", tracing.TaskSpanID(id, "flaky").String(), tracing.FlowSpanID(id).String()},
		{"task flaky (round 1)", tracing.TaskRoundSpanID(id, "flaky", 1).String(), tracing.FlowSpanID(id).String()},
		{"task next (blocked)", tracing.BlockedTaskSpanID(id, "next", 0).String(), tracing.FlowSpanID(id).String()},
		{"task next", tracing.TaskSpanID(id, "next").String(), tracing.FlowSpanID(id).String()},
		{"attempt 1", tracing.AttemptSpanID(flaky1).String(), tracing.TaskSpanID(id, "flaky").String()},
		{"attempt 2", tracing.AttemptSpanID(flaky2).String(), tracing.TaskRoundSpanID(id, "flaky", 1).String()},
		{"attempt 1", tracing.AttemptSpanID(next1).String(), tracing.TaskSpanID(id, "next").String()},
	} {
		if s := tr.byID[want.span]; s == nil || s.Name != want.name || s.Parent != want.parent {
			t.Errorf("%s: %+v, want span %s under %s", want.name, s, want.span, want.parent)
		}
	}
	if s := tr.byID[tracing.FlowRoundSpanID(id, 1).String()]; s != nil && s.Error {
		t.Errorf("the second round succeeded; its span: %+v", s)
	}
	// The process is one instance; its workers' spans say which worker.
	for _, s := range tr.spans {
		if s.Name == "claim" && s.Attrs["drover.worker.id"] != "dev-worker-1" {
			t.Errorf("claim phase of %s: worker %q", s.Attrs["drover.attempt.id"], s.Attrs["drover.worker.id"])
		}
	}
}

// checkEverySpan checks what holds for every span of a flow's trace: the
// flow's trace and drover.flow.id, a service.instance.id (one per
// service, or one of instances[service] where several processes run it),
// and no span id received twice.
func (tr *traceTree) checkEverySpan(t *testing.T, flowID string, instances map[string][]string) {
	t.Helper()
	seen := map[string]*tracingtest.Span{}
	one := map[string]string{} // service -> its instance, for services of one process
	for i := range tr.spans {
		s := &tr.spans[i]
		if s.Attrs["drover.flow.id"] != flowID || s.TraceID != tracing.TraceID(flowID).String() {
			t.Errorf("%s [%s]: drover.flow.id %q, trace %s", s.Name, s.Service(), s.Attrs["drover.flow.id"], s.TraceID)
		}
		inst := s.Resource["service.instance.id"]
		switch allowed, several := instances[s.Service()]; {
		case inst == "":
			t.Errorf("%s [%s]: no service.instance.id", s.Name, s.Service())
		case several && !slices.Contains(allowed, inst):
			t.Errorf("%s [%s]: service.instance.id %q, want one of %v", s.Name, s.Service(), inst, allowed)
		case !several && one[s.Service()] == "":
			one[s.Service()] = inst
		case !several && one[s.Service()] != inst:
			t.Errorf("%s [%s]: service.instance.id %q, and %q elsewhere in one process", s.Name, s.Service(), inst, one[s.Service()])
		}
		if prev := seen[s.SpanID]; prev != nil {
			t.Errorf("span id %s received twice: %q [%s] and %q [%s]", s.SpanID, prev.Name, prev.Service(), s.Name, s.Service())
		}
		seen[s.SpanID] = s
	}
}

// orphans are the spans whose parent was not received.
func (tr *traceTree) orphans() []*tracingtest.Span {
	var out []*tracingtest.Span
	for i := range tr.spans {
		if p := tr.spans[i].Parent; p != "" && tr.byID[p] == nil {
			out = append(out, &tr.spans[i])
		}
	}
	return out
}

// traceTree indexes received spans.
type traceTree struct {
	spans []tracingtest.Span
	byID  map[string]*tracingtest.Span
}

func newTraceTree(spans []tracingtest.Span) *traceTree {
	tr := &traceTree{spans: spans, byID: map[string]*tracingtest.Span{}}
	sort.SliceStable(tr.spans, func(i, j int) bool { return tr.spans[i].Start.Before(tr.spans[j].Start) })
	for i := range tr.spans {
		tr.byID[tr.spans[i].SpanID] = &tr.spans[i]
	}
	return tr
}

func (tr *traceTree) find(match func(*tracingtest.Span) bool) *tracingtest.Span {
	for i := range tr.spans {
		if match(&tr.spans[i]) {
			return &tr.spans[i]
		}
	}
	return nil
}

func (tr *traceTree) named(name string) *tracingtest.Span {
	return tr.find(func(s *tracingtest.Span) bool { return s.Name == name })
}

func (tr *traceTree) all(name string) []*tracingtest.Span {
	var out []*tracingtest.Span
	for i := range tr.spans {
		if tr.spans[i].Name == name {
			out = append(out, &tr.spans[i])
		}
	}
	return out
}

// children are a span's children in start order.
func (tr *traceTree) children(id string) []*tracingtest.Span {
	var out []*tracingtest.Span
	for i := range tr.spans {
		if tr.spans[i].Parent == id {
			out = append(out, &tr.spans[i])
		}
	}
	return out
}

// String draws the tree, for a failing test's log.
func (tr *traceTree) String() string {
	var b strings.Builder
	var draw func(id string, depth int)
	draw = func(id string, depth int) {
		for _, s := range tr.children(id) {
			fmt.Fprintf(&b, "%s%s [%s %s] err=%v %s\n", strings.Repeat("  ", depth), s.Name, s.Service(), s.SpanID, s.Error, s.Attrs["drover.attempt.id"])
			draw(s.SpanID, depth+1)
		}
	}
	draw("", 0)
	for _, s := range tr.spans {
		if s.Parent != "" && tr.byID[s.Parent] == nil {
			fmt.Fprintf(&b, "orphan: %s [%s] parent %s\n", s.Name, s.Service(), s.Parent)
		}
	}
	return b.String()
}

// startDev starts `controller dev`: a controller with embedded NATS and
// its workers in one process.
func startDev(t *testing.T, workers int, extraEnv ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dataDir: t.TempDir(), env: append(append([]string{}, workerEnv...), extraEnv...)}
	c.ctrl = start(t, "controller", c.env, "controller", "dev", "--data-dir", c.dataDir, "--nats-listen", "127.0.0.1:-1",
		"--workers", fmt.Sprint(workers), "--log-level", "debug")
	waitFor(t, 30*time.Second, "controller dev to write nats.url", func() bool {
		b, err := os.ReadFile(filepath.Join(c.dataDir, "nats.url"))
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			c.url = strings.TrimSpace(string(b))
			return true
		}
		select {
		case <-c.ctrl.done:
			t.Fatalf("controller dev exited: %v", c.ctrl.err)
		default:
		}
		return false
	})
	return c
}

// splitElections separates the spans of the controllers' elections, each
// a trace of its own, from the flows'.
func splitElections(spans []tracingtest.Span) (flows, elections []tracingtest.Span) {
	traces := map[string]bool{}
	for _, s := range spans {
		if s.Name == "leader election" {
			traces[s.TraceID] = true
		}
	}
	for _, s := range spans {
		if traces[s.TraceID] || s.Attrs["drover.flow.id"] == event.LeadershipFlow {
			elections = append(elections, s)
		} else {
			flows = append(flows, s)
		}
	}
	return flows, elections
}
