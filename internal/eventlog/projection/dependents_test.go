package projection

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// blockByWalkingFlow is blockDependents as it was: one pass over the whole
// flow. The index must block exactly what it blocked.
func blockByWalkingFlow(s *State, ev *event.Event, failed *Task) {
	f := s.Flows[failed.Flow]
	bad := map[string]string{failed.ID: failed.ID}
	for _, id := range f.Order {
		t := s.Task(f.ID, id)
		if t.State.Terminal() {
			if t.State == drovertype.TaskBlocked && t.BlockedBy == failed.ID {
				bad[id] = failed.ID
			}
			continue
		}
		for _, dep := range t.DependsOn {
			if root, ok := bad[dep]; ok {
				t.State, t.BlockedBy = drovertype.TaskBlocked, root
				bad[id] = root
				s.touchTask(t, ev)
				break
			}
		}
	}
}

// randomFlow is a flow of n tasks in random states, each depending on up to
// three earlier ones. A blocked task is blocked by a task upstream, maybe
// off any path of blocked tasks (an operator's retry reopened what was
// between).
func randomFlow(r *rand.Rand, s *State, f *Flow, from, n int) {
	states := []drovertype.TaskState{drovertype.TaskPending, drovertype.TaskScheduled, drovertype.TaskRunning,
		drovertype.TaskSucceeded, drovertype.TaskFailed, drovertype.TaskCancelled, drovertype.TaskBlocked}
	for i := from; i < from+n; i++ {
		t := &Task{Flow: f.ID, ID: fmt.Sprintf("t%03d", i), State: states[r.IntN(len(states))]}
		for range r.IntN(4) {
			if i > 0 {
				if dep := fmt.Sprintf("t%03d", r.IntN(i)); !slices.Contains(t.DependsOn, dep) {
					t.DependsOn = append(t.DependsOn, dep)
				}
			}
		}
		if up := upstream(s, f.ID, t); t.State == drovertype.TaskBlocked && len(up) > 0 {
			t.BlockedBy = up[r.IntN(len(up))] // only a failure upstream blocks a task
		} else if t.State == drovertype.TaskBlocked {
			t.State = drovertype.TaskPending
		}
		s.Tasks[TaskKey(f.ID, t.ID)] = t
		f.Order = append(f.Order, t.ID)
	}
}

// upstream lists the tasks t depends on, however far.
func upstream(s *State, flowID string, t *Task) []string {
	seen := map[string]bool{}
	for stack := slices.Clone(t.DependsOn); len(stack) > 0; {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen[id] {
			seen[id] = true
			stack = append(stack, s.Task(flowID, id).DependsOn...)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func cloneFlowState(s *State) *State {
	c := NewState()
	for k, f := range s.Flows {
		g := *f
		g.Order = slices.Clone(f.Order)
		c.Flows[k] = &g
	}
	for k, t := range s.Tasks {
		u := *t
		c.Tasks[k] = &u
	}
	return c
}

func taskStates(s *State) map[string]string {
	out := map[string]string{}
	for k, t := range s.Tasks {
		out[k] = string(t.State) + " " + t.BlockedBy
	}
	return out
}

// TestBlockDependentsAsTheWalkOfTheFlow: on random flows in random states,
// a failure blocks, through the index of dependents, the very tasks a walk
// of the whole flow blocked, and marks the same records, also after the
// flow's order grew (a review round) and after records were loaded anew.
func TestBlockDependentsAsTheWalkOfTheFlow(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	ev := &event.Event{Time: time.Unix(1, 0)}
	for round := range 500 {
		s := NewState()
		f := &Flow{ID: "f"}
		s.Flows[f.ID] = f
		randomFlow(r, s, f, 0, 5+r.IntN(60))
		for grow := range 3 {
			if grow > 0 {
				randomFlow(r, s, f, len(f.Order), 1+r.IntN(10))
			}
			if grow == 2 {
				s.downstream = nil // as LoadRecord leaves it
			}
			failed := s.Task(f.ID, f.Order[r.IntN(len(f.Order))])
			want := cloneFlowState(s)
			blockByWalkingFlow(want, ev, want.Task(f.ID, failed.ID))
			clear(s.dirty)
			s.blockDependents(ev, failed)
			if got, exp := taskStates(s), taskStates(want); !maps.Equal(got, exp) {
				for k := range exp {
					if got[k] != exp[k] {
						t.Errorf("round %d.%d, %s failed: task %s is %q, the walk of the flow left it %q", round, grow, failed.ID, k, got[k], exp[k])
					}
				}
				t.FailNow()
			}
			if !maps.Equal(s.dirty, want.dirty) {
				t.Fatalf("round %d.%d: marked %v, the walk of the flow marked %v", round, grow,
					slices.Sorted(maps.Keys(s.dirty)), slices.Sorted(maps.Keys(want.dirty)))
			}
		}
	}
}
