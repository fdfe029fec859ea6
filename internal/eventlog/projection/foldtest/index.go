package foldtest

import (
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// CheckIndex checks what the decisions read of each flow through the
// projection's index (State.OpenTasks, OrderedTasks, TaskSpec) against
// the flows and tasks themselves, found the slow way: an index that missed
// a change would have the decisions pass a task by.
func CheckIndex(tb testing.TB, st *projection.State) {
	tb.Helper()
	for _, f := range st.Flows {
		all := st.FlowTasks(f)
		if got := st.OrderedTasks(f); !slices.Equal(got, all) {
			tb.Fatalf("flow %s: the index orders its tasks %v, the flow %v", f.ID, ids(got), ids(all))
		}
		var want []*projection.Task
		for _, t := range all {
			a := st.Attempts[t.Attempt]
			if !t.State.Terminal() || a != nil && !a.State.Terminal() {
				want = append(want, t)
			}
		}
		open, n := st.OpenTasks(f)
		if !slices.Equal(open, want) || n != len(all) {
			tb.Fatalf("flow %s: the index has open %v of %d tasks, want %v of %d", f.ID, ids(open), n, ids(want), len(all))
		}
		for _, id := range f.Order {
			if w, _ := f.Spec.Task(id); st.TaskSpec(f, id) != w {
				tb.Fatalf("flow %s: the index finds task %s's spec at %p, the spec at %p", f.ID, id, st.TaskSpec(f, id), w)
			}
		}
	}
}

func ids(tasks []*projection.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}
