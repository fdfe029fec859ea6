package console

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// world is a projection folded from events the test writes, with the
// fold notices, stored events, artifacts and streams the console reads:
// everything but NATS.
type world struct {
	t       testing.TB
	mu      sync.RWMutex
	st      *projection.State
	seq     uint64
	events  map[uint64]*event.Event
	objects map[string]string
	subsMu  sync.Mutex
	subs    map[chan struct{}]struct{}
	outputs map[string]chan event.OutputChunkData
	acts    []string
	actErr  error
	workers []*fleet.Registration
	reads   atomic.Int64 // registry reads
	dead    []queue.DeadLetter
	deadCh  chan queue.DeadLetter
	now     time.Time
}

func newWorld(t testing.TB) *world {
	return &world{t: t, st: projection.NewState(), events: map[uint64]*event.Event{}, objects: map[string]string{},
		subs: map[chan struct{}]struct{}{}, outputs: map[string]chan event.OutputChunkData{},
		deadCh: make(chan queue.DeadLetter, 16), now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
}

func (w *world) clock() time.Time {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.now
}

func (w *world) Read(fn func(*projection.State)) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	fn(w.st)
}

func (w *world) Applied() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.seq
}

func (w *world) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.subsMu.Lock()
	w.subs[ch] = struct{}{}
	w.subsMu.Unlock()
	return ch, func() {
		w.subsMu.Lock()
		delete(w.subs, ch)
		w.subsMu.Unlock()
	}
}

func (w *world) subscribers() int {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	return len(w.subs)
}

// fold applies events as one commit and tells the subscribers.
func (w *world) fold(evs ...*event.Event) {
	w.mu.Lock()
	for _, ev := range evs {
		w.seq++
		w.events[w.seq] = ev
		if err := w.st.Apply(w.seq, ev); err != nil {
			w.t.Fatalf("fold %s: %v", ev.Type, err)
		}
	}
	w.st.ForgetChanges()
	w.mu.Unlock()
	w.subsMu.Lock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.subsMu.Unlock()
}

func (w *world) ev(typ event.Type, flowID, task, attempt string, epoch uint64, data any) *event.Event {
	w.t.Helper()
	w.mu.Lock()
	w.now = w.now.Add(time.Second)
	now := w.now
	w.mu.Unlock()
	id := drovertype.EventID(typ, flowID)
	switch {
	case epoch > 0:
		id = drovertype.ClaimEventID(typ, attempt, epoch)
	case attempt != "":
		id = drovertype.EventID(typ, attempt)
	}
	ev, err := event.New(id, typ, now, flowID, task, attempt, epoch, data)
	if err != nil {
		w.t.Fatal(err)
	}
	return ev
}

// submit folds a flow whose tasks depend as deps says (task -> its
// dependencies), with a prompt each.
func (w *world) submit(flowID string, tasks []string, deps map[string][]string, prompt func(string) string) {
	spec := flow.Spec{Name: strings.Split(flowID, "-")[0], Repo: "/repos/x.git", Base: "main", Runtime: "demo"}
	for _, id := range tasks {
		spec.Tasks = append(spec.Tasks, flow.Task{ID: id, Prompt: prompt(id), DependsOn: deps[id]})
	}
	w.fold(w.ev(event.FlowSubmitted, flowID, "", "", 0, event.FlowSubmittedData{Spec: spec}))
}

// run folds an attempt of a task from scheduling to its report.
func (w *world) run(flowID, task string, n int, rep *event.Report, runtime ...string) string {
	a := drovertype.AttemptID(flowID, task, n)
	rt := "demo"
	if len(runtime) > 0 {
		rt = runtime[0]
	}
	w.fold(w.ev(event.AttemptScheduled, flowID, task, a, 0, event.AttemptScheduledData{N: n, Runtime: rt, Pool: "default",
		Branch: drovertype.AttemptBranch(flowID, task, n)}))
	w.fold(w.ev(event.AttemptClaimed, flowID, task, a, 1, event.AttemptClaimedData{Worker: "w1"}))
	w.fold(w.ev(event.RuntimeStarted, flowID, task, a, 1, event.RuntimeStartedData{Pid: 42, Argv: []string{"demo-agent"}}))
	if rep != nil {
		w.fold(w.ev(event.AttemptReported, flowID, task, a, 1, rep))
	}
	return a
}

// fakes the rest of the sources

func (w *world) Object(_ context.Context, name string) (io.ReadCloser, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.objects[name]
	if !ok {
		return nil, errors.New("no such object")
	}
	return io.NopCloser(strings.NewReader(s)), nil
}

func (w *world) output(attempt string) chan event.OutputChunkData {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.outputs[attempt]
	if ch == nil {
		ch = make(chan event.OutputChunkData, 100)
		w.outputs[attempt] = ch
	}
	return ch
}

func (w *world) Output(_ context.Context, _, attempt string) (OutputStream, error) {
	return &fakeOutput{ch: w.output(attempt), stop: make(chan struct{})}, nil
}

type fakeOutput struct {
	ch   chan event.OutputChunkData
	stop chan struct{}
	once sync.Once
}

func (o *fakeOutput) Next() (event.OutputChunkData, uint64, error) {
	select {
	case c := <-o.ch:
		return c, uint64(len(o.ch)), nil
	case <-o.stop:
		return event.OutputChunkData{}, 0, errors.New("stopped")
	}
}

func (o *fakeOutput) Stop() { o.once.Do(func() { close(o.stop) }) }

func (w *world) Events(_ context.Context, seqs []uint64) ([]StreamEvent, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []StreamEvent
	for _, s := range seqs {
		if ev := w.events[s]; ev != nil {
			out = append(out, StreamEvent{Seq: s, Event: ev})
		}
	}
	return out, nil
}

func (w *world) Workers(context.Context) ([]*fleet.Registration, error) {
	w.reads.Add(1)
	return w.workers, nil
}

func (w *world) WatchWorkers(ctx context.Context) (<-chan struct{}, error) {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (w *world) DeadLetters(context.Context, int) ([]queue.DeadLetter, error) { return w.dead, nil }

func (w *world) WatchDeadLetters(ctx context.Context) (<-chan queue.DeadLetter, error) {
	out := make(chan queue.DeadLetter)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-w.deadCh:
				select {
				case out <- d:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (w *world) Act(_ context.Context, a Action, target, reason string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acts = append(w.acts, string(a)+" "+target+" "+reason)
	if w.actErr != nil {
		return "", w.actErr
	}
	return "done: " + string(a) + " " + target, nil
}

func (w *world) actions() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return append([]string(nil), w.acts...)
}

var deadSeq uint64 = 100

func deadLetterOf(text string) queue.DeadLetter {
	deadSeq++
	return queue.DeadLetter{Seq: deadSeq, Source: "events", Reason: text, Data: []byte(text), Time: time.Now()}
}

func getenv(name string) string { return os.Getenv(name) }
