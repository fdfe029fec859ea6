package projection

import (
	"math/bits"
	"strings"
	"sync"

	"github.com/drover-dev/drover/internal/flow"
)

// taskIndex is what the controller's decisions read of each flow every
// round, kept up to date with what the fold changed, so that a round
// costs what changed rather than the size of its flows: the flow's tasks
// in order (without a key built and looked up per task), where each task
// is in its spec (flow.Spec.Task walks the spec: once per task scheduled,
// the square of the flow's size), and which tasks are open.
//
// A task is settled when it has ended and so has its current attempt (or
// it has none): nothing the decisions do reads it again until an operator
// reopens it, which the fold marks. Every other task is open. The index
// follows the records the fold marks (State.mark): a task marked, or its
// current attempt, is looked at again; a flow whose definition is marked
// is indexed anew. It is brought up to date by its readers, under its own
// lock (several may read the projection at once, and the fold, which
// writes it, excludes them all); a fold that no one reads (a standby's)
// keeps only a bounded list of what changed, then forgets it and has the
// next reader index everything anew.
type taskIndex struct {
	mu    sync.Mutex
	flows map[string]*flowIndex
	// stale: index every flow anew (records were loaded, or too much
	// changed unread).
	stale bool
	// What the fold changed since the index was last brought up to date.
	defs, tasks, attempts []string
}

// maxUnread bounds what the index keeps of the changes no one has read
// (a variable for the tests).
var maxUnread = 1 << 16

// flowIndex is the index of one flow's tasks.
type flowIndex struct {
	tasks []*Task        // in the flow's order
	pos   map[string]int // task id -> place in tasks
	spec  map[string]int // task id -> place in the flow's Spec.Tasks
	open  []uint64       // bit i: tasks[i] is open
}

func newTaskIndex() *taskIndex { return &taskIndex{flows: map[string]*flowIndex{}, stale: true} }

// note is called with every record key the fold marks.
func (x *taskIndex) note(key string) {
	switch {
	case strings.HasPrefix(key, keyTask):
		x.tasks = append(x.tasks, key[len(keyTask):])
	case strings.HasPrefix(key, keyAttempt):
		x.attempts = append(x.attempts, key[len(keyAttempt):])
	case strings.HasPrefix(key, keyFlowDef):
		x.defs = append(x.defs, key[len(keyFlowDef):])
	default:
		return
	}
	if len(x.tasks)+len(x.attempts)+len(x.defs) > maxUnread {
		x.invalidate()
	}
}

// invalidate has the next reader index every flow anew.
func (x *taskIndex) invalidate() {
	x.stale = true
	x.defs, x.tasks, x.attempts = x.defs[:0], x.tasks[:0], x.attempts[:0]
}

// settled reports whether nothing the decisions do reads t.
func (s *State) settled(t *Task) bool {
	if !t.State.Terminal() {
		return false
	}
	a := s.Attempts[t.Attempt]
	return a == nil || a.State.Terminal()
}

// update brings the index up to date with the fold. Call with x.mu held.
func (s *State) update() {
	x := s.index
	if x.stale {
		clear(x.flows)
		for _, f := range s.Flows {
			x.flows[f.ID] = s.indexFlow(f)
		}
		x.invalidate()
		x.stale = false
		return
	}
	for _, id := range x.defs {
		if f := s.Flows[id]; f != nil {
			x.flows[id] = s.indexFlow(f)
		}
	}
	for _, k := range x.tasks {
		if t := s.Tasks[k]; t != nil {
			s.reindex(t)
		}
	}
	for _, id := range x.attempts {
		if a := s.Attempts[id]; a != nil {
			if t := s.Task(a.Flow, a.Task); t != nil && t.Attempt == id {
				s.reindex(t)
			}
		}
	}
	x.defs, x.tasks, x.attempts = x.defs[:0], x.tasks[:0], x.attempts[:0]
}

// indexFlow indexes a flow's tasks anew.
func (s *State) indexFlow(f *Flow) *flowIndex {
	fi := &flowIndex{
		tasks: make([]*Task, 0, len(f.Order)),
		pos:   make(map[string]int, len(f.Order)),
		spec:  make(map[string]int, len(f.Spec.Tasks)),
		open:  make([]uint64, (len(f.Order)+63)/64),
	}
	for i := range f.Spec.Tasks {
		if _, dup := fi.spec[f.Spec.Tasks[i].ID]; !dup {
			fi.spec[f.Spec.Tasks[i].ID] = i // the first, as flow.Spec.Task finds
		}
	}
	for _, id := range f.Order {
		t := s.Task(f.ID, id)
		if t == nil {
			continue
		}
		i := len(fi.tasks)
		fi.pos[id] = i
		fi.tasks = append(fi.tasks, t)
		if !s.settled(t) {
			fi.open[i/64] |= 1 << (i % 64)
		}
	}
	return fi
}

// reindex looks at a task the fold changed again.
func (s *State) reindex(t *Task) {
	fi := s.index.flows[t.Flow]
	if fi == nil {
		return // its flow is not recorded yet, or indexed anew with it
	}
	i, ok := fi.pos[t.ID]
	if !ok {
		return // not in the flow's order: not one of its tasks
	}
	fi.tasks[i] = t
	if s.settled(t) {
		fi.open[i/64] &^= 1 << (i % 64)
	} else {
		fi.open[i/64] |= 1 << (i % 64)
	}
}

// OpenTasks returns the flow's open tasks (see taskIndex) in the flow's
// order, and the number of its tasks. The decisions walk these: a settled
// task calls for none.
func (s *State) OpenTasks(f *Flow) (open []*Task, all int) {
	x := s.index
	x.mu.Lock()
	defer x.mu.Unlock()
	s.update()
	fi := s.indexed(f)
	n := 0
	for _, word := range fi.open {
		n += bits.OnesCount64(word)
	}
	open = make([]*Task, 0, n)
	for w, word := range fi.open {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			open = append(open, fi.tasks[w*64+b])
			word &^= 1 << b
		}
	}
	return open, len(fi.tasks)
}

// OrderedTasks is FlowTasks from the index: the flow's tasks in order,
// a slice the caller must not change.
func (s *State) OrderedTasks(f *Flow) []*Task {
	x := s.index
	x.mu.Lock()
	defer x.mu.Unlock()
	s.update()
	return s.indexed(f).tasks
}

// indexed is f's index, made now if the fold has not made it (a flow
// the caller holds that the projection does not). Call with x.mu held.
func (s *State) indexed(f *Flow) *flowIndex {
	fi := s.index.flows[f.ID]
	if fi == nil {
		fi = s.indexFlow(f)
		if s.Flows[f.ID] == f {
			s.index.flows[f.ID] = fi
		}
	}
	return fi
}

// TaskSpec is f.Spec.Task(id) from the index, without walking the spec.
func (s *State) TaskSpec(f *Flow, id string) *flow.Task {
	x := s.index
	x.mu.Lock()
	defer x.mu.Unlock()
	s.update()
	if fi := x.flows[f.ID]; fi != nil {
		if i, ok := fi.spec[id]; ok && i < len(f.Spec.Tasks) && f.Spec.Tasks[i].ID == id {
			return &f.Spec.Tasks[i]
		}
	}
	t, _ := f.Spec.Task(id) // not in the spec (a review round's task), or not indexed
	return t
}
