package projection

import (
	"cmp"
	"slices"
)

// dependents is the fold's reverse of a flow's dependencies: the tasks that
// depend on each task. A failure blocks what is downstream of it, and
// walking the whole flow for each failure made a flow's failures cost the
// square of its size (a 100,000-task flow's fold spent a third of its time
// there). It is derived from the tasks' DependsOn, made when a failure first
// needs it, and extended as the flow's order grows (a review round appends
// tasks; the order only grows).
type dependents struct {
	n    int                 // tasks of the flow's order indexed
	pos  map[string]int      // task id -> its place in the flow's order
	down map[string][]string // task id -> the tasks that depend on it
}

// dependentsOf is f's index, brought up to date with its order.
func (s *State) dependentsOf(f *Flow) *dependents {
	if s.downstream == nil {
		s.downstream = map[string]*dependents{}
	}
	d := s.downstream[f.ID]
	if d == nil || d.n > len(f.Order) {
		d = &dependents{pos: make(map[string]int, len(f.Order)), down: map[string][]string{}}
		s.downstream[f.ID] = d
	}
	for i := d.n; i < len(f.Order); i++ {
		id := f.Order[i]
		d.pos[id] = i
		if t := s.Task(f.ID, id); t != nil {
			for _, dep := range t.DependsOn {
				d.down[dep] = append(d.down[dep], id)
			}
		}
	}
	d.n = len(f.Order)
	return d
}

// below lists the tasks downstream of id, however far, in the flow's order
// (dependencies first).
func (d *dependents) below(id string) []string {
	seen := map[string]bool{id: true}
	var out []string
	for stack := []string{id}; len(stack) > 0; {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range d.down[v] {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
				stack = append(stack, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(d.pos[a], d.pos[b]) })
	return out
}
