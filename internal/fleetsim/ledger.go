package fleetsim

import (
	"sync"
	"time"
)

// Ledger records every simulated run and build, across the fleet's
// workers: which attempts ran and how often, each task's runs in order,
// each flow's integration builds. Check compares it with what the
// runtimes dictated and what the controller recorded.
type Ledger struct {
	mu sync.Mutex
	// runs counts the runs of each attempt: more than one is an attempt
	// run twice for one decision.
	runs map[string]int
	// tasks are each task's attempts in the order their runs began, by
	// flow id and task (taskKey).
	tasks map[string][]string
	// builds are each flow's integration builds.
	builds map[string][]Build
	// started is when each run began, by attempt, on this process's clock.
	started map[string]time.Time
}

// Build is one simulated build of a flow's integration branch.
type Build struct {
	N       int
	Attempt string
	Tasks   []string // the tasks it merged, in order
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{runs: map[string]int{}, tasks: map[string][]string{}, builds: map[string][]Build{},
		started: map[string]time.Time{}}
}

func taskKey(flowID, task string) string { return flowID + "/" + task }

// start records that attempt of the task begins to run, and returns which
// run of the task it is (1, 2, …): its outcome's index. A second run of an
// attempt counts as a run of its own, so that its outcome differs.
func (l *Ledger) start(flowID, task, attempt string, at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[attempt]++
	k := taskKey(flowID, task)
	l.tasks[k] = append(l.tasks[k], attempt)
	if _, ok := l.started[attempt]; !ok {
		l.started[attempt] = at
	}
	return len(l.tasks[k])
}

// built records a build of a flow's integration branch.
func (l *Ledger) built(flowID string, b Build) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.builds[flowID] = append(l.builds[flowID], b)
}

// Runs returns how many runs began, in all.
func (l *Ledger) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.runs {
		n += c
	}
	return n
}
