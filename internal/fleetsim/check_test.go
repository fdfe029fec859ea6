package fleetsim

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// world is a flow of three tasks as the fold and the ledger would hold it
// after a clean run of Mix{} (every task succeeds at its first run).
func world() (*projection.State, *Ledger) {
	st, l := projection.NewState(), NewLedger()
	f := &projection.Flow{ID: "f1", State: drovertype.FlowSucceeded, Order: []string{"a", "b", "c"}}
	st.Flows[f.ID] = f
	var merged []string
	for _, id := range f.Order {
		st.Tasks[projection.TaskKey("f1", id)] = &projection.Task{Flow: "f1", ID: id, State: drovertype.TaskSucceeded}
		l.start("f1", id, "f1_"+id+"_1", time.Time{})
		merged = append(merged, id)
	}
	l.built("f1", Build{N: 1, Attempt: "f1__integrate_1", Tasks: merged})
	return st, l
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spoil         func(st *projection.State, l *Ledger)
		lost, doubled int
		says          string
	}{
		{"clean", func(*projection.State, *Ledger) {}, 0, 0, ""},
		{"a task in another state", func(st *projection.State, _ *Ledger) {
			st.Tasks["f1/b"].State = drovertype.TaskFailed
		}, 1, 0, "task f1/b is failed after 1 runs; its runs dictated succeeded after 1"},
		{"an attempt run twice", func(_ *projection.State, l *Ledger) {
			l.start("f1", "c", "f1_c_1", time.Time{})
		}, 0, 2, "attempt f1_c_1 ran 2 times"},
		{"a task run again by a new decision", func(_ *projection.State, l *Ledger) {
			l.start("f1", "c", "f1_c_2", time.Time{})
		}, 0, 1, "task f1/c ran 2 times; its runs dictated 1"},
		{"a run that never happened", func(_ *projection.State, l *Ledger) {
			delete(l.tasks, "f1/a")
		}, 1, 0, "task f1/a ran 0 times"},
		{"a task merged twice", func(_ *projection.State, l *Ledger) {
			l.builds["f1"][0].Tasks = append(l.builds["f1"][0].Tasks, "a")
		}, 0, 1, "merged task a twice"},
		{"a success not merged", func(_ *projection.State, l *Ledger) {
			l.builds["f1"][0].Tasks = []string{"a", "b"}
		}, 1, 0, "task f1/c is succeeded and merged=false"},
		{"a flow built twice", func(_ *projection.State, l *Ledger) {
			l.built("f1", l.builds["f1"][0])
		}, 0, 1, "built 2 times"},
		{"no build at all", func(_ *projection.State, l *Ledger) {
			delete(l.builds, "f1")
		}, 1, 0, "no integration branch"},
		{"a flow not complete", func(st *projection.State, _ *Ledger) {
			st.Flows["f1"].State = drovertype.FlowRunning
		}, 1, 0, "flow f1 is running"},
		{"a task run again after a lapsed lease", func(st *projection.State, l *Ledger) {
			st.Tasks["f1/c"].Attempts = 2
			st.Attempts["f1_c_1"] = &projection.Attempt{ID: "f1_c_1", Error: &event.ErrorInfo{Class: drovertype.ClassWorkerLost}}
			l.start("f1", "c", "f1_c_2", time.Time{})
		}, 0, 0, "1 lapsed leases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, l := world()
			tc.spoil(st, l)
			v := Check(st, []string{"f1"}, Mix{}, 3, l)
			if v.Lost != tc.lost || v.Doubled != tc.doubled || (v.Lapsed > 0) != strings.Contains(tc.name, "lapsed") {
				t.Errorf("lost %d doubled %d, want %d and %d: %v", v.Lost, v.Doubled, tc.lost, tc.doubled, v.Problems)
			}
			if tc.says != "" && !strings.Contains(strings.Join(v.Problems, "\n"), tc.says) {
				t.Errorf("problems %q do not say %q", v.Problems, tc.says)
			}
		})
	}
	st, l := world()
	if v := Check(st, []string{"f1", "f2"}, Mix{}, 3, l); v.Lost != 1 || !strings.Contains(v.Problems[0], "f2 was never recorded") {
		t.Errorf("a flow never recorded: %+v", v)
	}
}
