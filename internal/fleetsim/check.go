package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/queue"
)

// Verdict is what the simulated flows came to, against what their
// runtimes dictated.
type Verdict struct {
	// Lost counts tasks that did not end as their runs dictated: in
	// another state, or with a dictated run that never happened, or
	// succeeded and missing from their flow's integration branch; and
	// flows that did not complete.
	Lost int
	// Doubled counts attempts run more than once (one decision, two
	// runs), tasks run more often than their runs dictated, and tasks
	// merged twice into an integration branch or flows built twice.
	Doubled int
	// Lapsed counts the tasks that ended otherwise than their runs
	// dictated because the controller declared attempts of theirs lost,
	// their claims not renewed for a lease (WORKER_LOST): the contract's
	// retry, which a fleet too busy to renew its claims in time meets.
	// They are neither lost nor doubled. LapsedAttempts counts those
	// attempts, in all.
	Lapsed, LapsedAttempts int
	// States counts the tasks by their end state.
	States map[drovertype.TaskState]int
	// Problems describes the first few of each.
	Problems []string
}

// maxProblems bounds the problems a Verdict describes.
const maxProblems = 20

func (v *Verdict) problem(lost bool, format string, args ...any) {
	if lost {
		v.Lost++
	} else {
		v.Doubled++
	}
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Check compares the projection st (the fold of the controller's event
// log) and the ledger of runs with what mix dictated for the flows, whose
// ids are flows, their tasks allowed maxAttempts.
func Check(st *projection.State, flows []string, mix Mix, maxAttempts int, l *Ledger) Verdict {
	v := Verdict{States: map[drovertype.TaskState]int{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, n := range l.runs {
		if n > 1 {
			v.problem(false, "attempt %s ran %d times", a, n)
		}
	}
	for _, id := range flows {
		f := st.Flows[id]
		if f == nil {
			v.problem(true, "flow %s was never recorded", id)
			continue
		}
		if !f.State.Terminal() {
			v.problem(true, "flow %s is %s", id, f.State)
		}
		merged := v.checkBuilds(id, l.builds[id])
		succeeded := 0
		for _, t := range st.FlowTasks(f) {
			v.States[t.State]++
			if t.State == drovertype.TaskSucceeded {
				succeeded++
			}
			lapsed := lapses(st, t)
			v.LapsedAttempts += lapsed
			v.checkTask(t, mix.Expect(t.ID, maxAttempts), len(l.tasks[taskKey(id, t.ID)]), lapsed, merged)
		}
		if merged == nil && succeeded > 0 {
			v.problem(true, "flow %s has %d succeeded tasks and no integration branch", id, succeeded)
		}
	}
	return v
}

// lapses counts the task's attempts the controller declared lost.
func lapses(st *projection.State, t *projection.Task) int {
	n := 0
	for i := 1; i <= t.Attempts; i++ {
		if a := st.Attempts[drovertype.AttemptID(t.Flow, t.ID, i)]; a != nil && a.Error != nil && a.Error.Class == drovertype.ClassWorkerLost {
			n++
		}
	}
	return n
}

// checkTask compares one task with what its runs dictated; a task whose
// attempts the controller declared lost is only counted, unless it did not
// end or was merged wrongly.
func (v *Verdict) checkTask(t *projection.Task, want Expected, runs, lapsed int, merged map[string]bool) {
	if lapsed > 0 && t.State.Terminal() && (t.State != want.State || runs != want.Runs) &&
		(merged == nil || merged[t.ID] == (t.State == drovertype.TaskSucceeded)) {
		v.Lapsed++
		if len(v.Problems) < maxProblems {
			v.Problems = append(v.Problems, fmt.Sprintf("task %s/%s is %s after %d runs and %d lapsed leases; its runs dictated %s after %d",
				t.Flow, t.ID, t.State, runs, lapsed, want.State, want.Runs))
		}
		return
	}
	switch {
	case t.State != want.State:
		v.problem(true, "task %s/%s is %s after %d runs; its runs dictated %s after %d", t.Flow, t.ID, t.State, runs, want.State, want.Runs)
	case runs < want.Runs:
		v.problem(true, "task %s/%s ran %d times; its runs dictated %d", t.Flow, t.ID, runs, want.Runs)
	case runs > want.Runs:
		v.problem(false, "task %s/%s ran %d times; its runs dictated %d", t.Flow, t.ID, runs, want.Runs)
	case merged != nil && merged[t.ID] != (t.State == drovertype.TaskSucceeded):
		v.problem(true, "task %s/%s is %s and merged=%v into the flow's integration branch", t.Flow, t.ID, t.State, merged[t.ID])
	}
}

// checkBuilds checks a flow's integration builds: one, merging each task
// once. It returns the tasks it merged, nil when there was none.
func (v *Verdict) checkBuilds(flowID string, builds []Build) map[string]bool {
	if len(builds) == 0 {
		return nil
	}
	if len(builds) > 1 {
		v.problem(false, "flow %s's integration branch was built %d times", flowID, len(builds))
	}
	merged := map[string]bool{}
	for _, task := range builds[len(builds)-1].Tasks {
		if merged[task] {
			v.problem(false, "flow %s's integration merged task %s twice", flowID, task)
		}
		merged[task] = true
	}
	return merged
}

// Log is what FoldLog read: the fold of the whole EVENTS stream, how many
// messages it held, and the claims' waits (ClaimWaits).
type Log struct {
	State  *projection.State
	Events int
	claims []slotEvent
}

// FoldLog reads the whole EVENTS stream and folds it, as `controller
// rebuild` would, into a fresh projection.
func FoldLog(ctx context.Context, js jetstream.JetStream) (*Log, error) {
	st, n, claims, err := foldLog(ctx, js)
	if err != nil {
		return nil, err
	}
	return &Log{State: st, Events: n, claims: claims}, nil
}

func foldLog(ctx context.Context, js jetstream.JetStream) (*projection.State, int, []slotEvent, error) {
	cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("fleetsim: read the log: %w", err)
	}
	st := projection.NewState()
	n := 0
	var claims []slotEvent
	for {
		batch, err := cons.Fetch(4096, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, n, nil, fmt.Errorf("fleetsim: read the log: %w", err)
		}
		var pending uint64
		got := 0
		for msg := range batch.Messages() {
			md, err := msg.Metadata()
			if err != nil {
				return nil, n, nil, fmt.Errorf("fleetsim: read the log: %w", err)
			}
			st.ApplyRaw(md.Sequence.Stream, msg.Subject(), msg.Data())
			if e, ok := slotEventOf(msg.Subject(), msg.Data()); ok {
				claims = append(claims, e)
			}
			st.ForgetChanges()
			pending, got = md.NumPending, got+1
		}
		n += got
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, n, nil, fmt.Errorf("fleetsim: read the log: %w", err)
		}
		if got == 0 || pending == 0 {
			return st, n, claims, nil
		}
	}
}
