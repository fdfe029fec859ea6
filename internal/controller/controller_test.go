package controller

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// harness runs a controller in-process against an embedded nats-server, and
// can stop and restart it on the same or a fresh store.
type harness struct {
	t   *testing.T
	cfg *config.Config
	nc  *nats.Conn
	js  jetstream.JetStream
	// leaseJS is the lease's connection, as Serve gives the controller one.
	leaseJS jetstream.JetStream
	cancel  context.CancelFunc
	done    chan error
	store   *store.Store
	ctrl    *Controller
	setup   func(*Controller) // before Run, if set
	// noAPI: the controller does not serve the operator API's shared
	// subjects (only, when it leads, the leader's).
	noAPI bool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Ensure(context.Background(), js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	lnc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lnc.Close)
	ljs, err := jetstream.New(lnc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{DataDir: t.TempDir(), Defaults: config.Defaults{Pool: "default"},
		Queue:    config.Queue{AckWait: 30 * time.Second},
		Runtimes: map[string]config.Runtime{"demo": {Binary: "demo-agent"}}}
	return &harness{t: t, cfg: cfg, nc: nc, js: js, leaseJS: ljs}
}

func (h *harness) start(dir string) {
	h.t.Helper()
	store, err := store.Open(dir, store.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = store
	h.ctrl = New(h.cfg, h.js, store, slog.New(slog.DiscardHandler))
	h.ctrl.leaseJS = h.leaseJS
	if h.setup != nil {
		h.setup(h.ctrl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	known := func(n string) bool { return n == "demo" }
	stopAPI := func() {}
	if h.noAPI {
		h.ctrl.known = known
	} else {
		svc, err := h.ctrl.ServeAPI(ctx, h.nc, known)
		if err != nil {
			h.t.Fatal(err)
		}
		stopAPI = func() { _ = svc.Stop() }
	}
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() {
		err := h.ctrl.Run(ctx)
		stopAPI()
		h.done <- err
	}()
	h.t.Cleanup(h.stop)
}

// submitOne submits a flow of one task, a, and returns the flow's id and
// its first attempt's.
func (h *harness) submitOne() (flowID, attempt string) {
	h.t.Helper()
	spec := &flow.Spec{Name: "one", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{{ID: "a", Prompt: "p"}}}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		h.t.Fatal(err)
	}
	return id, drovertype.AttemptID(id, "a", 1)
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("controller run: %v", err)
	}
	h.cancel = nil
	if err := h.store.Close(); err != nil {
		h.t.Error(err)
	}
}

func (h *harness) waitFor(what string, cond func(st *projection.State) bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		h.store.Read(func(st *projection.State) { ok = cond(st) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// applied waits until the fold has applied the events stream's last
// message, and returns its sequence.
func (h *harness) applied() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.store.Applied() < info.State.LastSeq {
		if time.Now().After(deadline) {
			h.t.Fatalf("the fold did not reach #%d", info.State.LastSeq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return info.State.LastSeq
}

// count returns how many messages of one event type the flow has.
func (h *harness) count(flowID string, typ event.Type) int {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(queue.EventSubject(flowID, string(typ))))
	if err != nil {
		h.t.Fatal(err)
	}
	return int(info.State.Subjects[queue.EventSubject(flowID, string(typ))])
}

func (h *harness) jobs() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), queue.AttemptsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Msgs
}

// publish records a worker's event for an attempt (or integration build)
// at epoch, under the id a worker gives it; at epoch 0, a decision, with
// the leader epoch of the day as the leader stamps it.
func (h *harness) publish(typ event.Type, flowID, task, attempt string, epoch uint64, data any) {
	h.t.Helper()
	ev, err := event.New(drovertype.ClaimEventID(typ, attempt, epoch), typ, time.Now(), flowID, task, attempt, epoch, data)
	if err != nil {
		h.t.Fatal(err)
	}
	if epoch == 0 {
		h.store.Read(func(st *projection.State) { ev.LeaderEpoch = st.LeaderEpoch() })
	}
	if _, err := queue.PublishEvent(context.Background(), h.js, ev); err != nil {
		h.t.Fatal(err)
	}
}

// TestRestartRederivesWithoutDoubling stops the controller at points where
// decisions are due and checks that a restarted one (on the same store, or on
// an empty one that refolds the whole log) makes each decision exactly once.
func TestRestartRederivesWithoutDoubling(t *testing.T) {
	h := newHarness(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	h.start(stateDir)

	spec := &flow.Spec{Name: "chain", Repo: "/srv/repo.git", Base: "main", Runtime: "demo", Tasks: []flow.Task{
		{ID: "a", Prompt: "first"},
		{ID: "b", Prompt: "second", DependsOn: []string{"a"}},
	}}
	id, err := (&Client{NC: h.nc}).Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	attA := drovertype.AttemptID(id, "a", 1)
	h.waitFor("a's attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[attA] != nil })
	deadline := time.Now().Add(10 * time.Second)
	for h.jobs() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}

	// Restart on the same store: a new term, whose leader republishes the
	// queued job under its epoch (workers refuse the older copy); the
	// decision itself is not made again.
	h.stop()
	h.start(stateDir)
	deadline = time.Now().Add(10 * time.Second)
	for h.jobs() != 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // at least one more decide tick
	if n := h.jobs(); n != 2 {
		t.Errorf("jobs after restart = %d, want 2: one per term", n)
	}
	if n := h.count(id, event.AttemptScheduled); n != 1 {
		t.Errorf("attempt_scheduled events = %d, want 1", n)
	}

	// A worker runs a to success; then b is scheduled with a's result to merge.
	h.publish(event.AttemptClaimed, id, "a", attA, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", attA, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	attB := drovertype.AttemptID(id, "b", 1)
	h.waitFor("b's attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[attB] != nil })
	var merge []event.DepResult
	h.store.Read(func(st *projection.State) { merge = st.Attempts[attB].Merge })
	if len(merge) != 1 || merge[0].Branch != drovertype.AttemptBranch(id, "a", 1) || merge[0].Commit != "abc" {
		t.Errorf("b merges %+v", merge)
	}

	// b fails: the controller classifies and fails the task, and the flow.
	h.publish(event.AttemptClaimed, id, "b", attB, 1, event.AttemptClaimedData{Worker: "w2"})
	h.publish(event.AttemptReported, id, "b", attB, 1, event.Report{
		Success: false, ExitCode: 3, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Message: "exit code 3"}})
	// The flow's integration branch collects a's result; a worker builds it.
	h.waitFor("the integration to be scheduled", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	var in projection.Integration
	h.store.Read(func(st *projection.State) { in = *st.Flows[id].Integration })
	if len(in.Merge) != 1 || in.Merge[0].Task != "a" || in.Branch != drovertype.IntegrationBranch(id, 1) {
		t.Errorf("integration %+v", in)
	}
	h.publish(event.FlowIntegrated, id, "", drovertype.IntegrationID(id, 1), 1,
		event.FlowIntegratedData{N: 1, Branch: in.Branch, Commit: "def"})
	h.waitFor("the flow to fail", func(st *projection.State) bool { return st.Flows[id].State == drovertype.FlowFailed })

	// Refold everything into an empty store: the same state, no new decisions.
	before := map[event.Type]int{}
	for _, typ := range []event.Type{event.AttemptScheduled, event.RuntimeErrorClassified, event.TaskFailed,
		event.IntegrationScheduled, event.FlowCompleted} {
		before[typ] = h.count(id, typ)
	}
	var live []byte
	h.store.Read(func(st *projection.State) { live, _ = json.Marshal(st.Flows[id]) })
	h.stop()
	h.start(filepath.Join(t.TempDir(), "fresh"))
	h.waitFor("the refold", func(st *projection.State) bool { return st.Flows[id] != nil && st.Flows[id].State.Terminal() })
	time.Sleep(1500 * time.Millisecond)
	var refolded []byte
	h.store.Read(func(st *projection.State) { refolded, _ = json.Marshal(st.Flows[id]) })
	if string(live) != string(refolded) {
		t.Errorf("refolded flow differs:\nlive:     %s\nrefolded: %s", live, refolded)
	}
	want := map[event.Type]int{event.AttemptScheduled: 2, event.RuntimeErrorClassified: 1, event.TaskFailed: 1,
		event.IntegrationScheduled: 1, event.FlowCompleted: 1}
	for typ, n := range before {
		if n != want[typ] {
			t.Errorf("%s events = %d, want %d", typ, n, want[typ])
		}
		if got := h.count(id, typ); got != n {
			t.Errorf("%s events after refold = %d, want %d", typ, got, n)
		}
	}
	res, err := h.ctrl.Rebuild(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal {
		t.Errorf("rebuild differs: %v", res.Diffs)
	}
}

// TestFoldReplacesFailedConsumer: when the events consumer fails (here
// after two events; in life, nats.go giving up recreating it after a
// NATS node was lost), the fold starts another from the event after the
// last it applied, and the flow goes on, every event applied once.
func TestFoldReplacesFailedConsumer(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var opened []uint64
	h.setup = func(c *Controller) {
		c.events = func(ctx context.Context, seq uint64) (jetstream.MessagesContext, error) {
			mu.Lock()
			opened = append(opened, seq)
			first := len(opened) == 1
			mu.Unlock()
			it, err := c.orderedEvents(ctx, seq)
			if err != nil || !first {
				return it, err
			}
			return &failingEvents{MessagesContext: it, left: 2}, nil
		}
	}
	h.start(filepath.Join(t.TempDir(), "state"))
	id, att := h.submitOne()
	h.waitFor("a's attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[att] != nil })
	h.publish(event.AttemptClaimed, id, "a", att, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", att, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	h.waitFor("the integration to be scheduled", func(st *projection.State) bool { return st.Flows[id].Integration != nil })

	mu.Lock()
	got := slices.Clone(opened)
	mu.Unlock()
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("consumers opened from %v, want [1 3]: the second from the event after the two folded", got)
	}
	res, err := h.ctrl.Rebuild(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal {
		t.Errorf("live state differs from a rebuild: %v", res.Diffs)
	}
}

// failingEvents delivers left messages, then fails as a consumer that
// could not be recreated does.
type failingEvents struct {
	jetstream.MessagesContext
	left int
}

func (f *failingEvents) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	if f.left == 0 {
		f.Stop()
		return nil, errors.New("nats: timeout recreating the consumer")
	}
	f.left--
	return f.MessagesContext.Next(opts...)
}

// TestSubmitRejectsInvalid: the server validates too, and records nothing.
func TestSubmitRejectsInvalid(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	cl := &Client{NC: h.nc}
	_, err := cl.Submit(context.Background(), &flow.Spec{Name: "x", Repo: "/r", Base: "main", Runtime: "nosuch", Tasks: []flow.Task{{ID: "a", Prompt: "p"}}})
	apiErr, ok := err.(*APIError)
	if !ok || apiErr.Code != CodeBadRequest || apiErr.Message != `runtime: unknown runtime "nosuch": it is not configured` {
		t.Fatalf("err = %v, want a bad request", err)
	}
	// By field too, for the CLI to place in the file (flow.Locate).
	if p := apiErr.Problems; len(p) != 1 || p[0].Field != "runtime" || p[0].Msg != `unknown runtime "nosuch": it is not configured` {
		t.Errorf("problems %+v, want the runtime's", p)
	}
	st, err := cl.Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Flows) != 0 || st.Applied != 1 {
		t.Errorf("state changed (beyond the controller's election, at 1): %+v", st)
	}
	if _, err := cl.Status(context.Background(), "nosuch-flow"); err == nil {
		t.Error("status of an unknown flow: no error")
	}
}
