package flow

import "container/heap"

// Limits that keep a hostile or broken flow file from exhausting memory in
// the controller, which parses files it did not write.
const (
	MaxFileSize   = 1 << 20   // bytes in a flow file
	MaxTasks      = 10_000    // tasks in one flow
	MaxPromptSize = 256 << 10 // bytes in one prompt
)

// DefaultBase is the revision tasks start from when a flow names none.
const DefaultBase = "HEAD"

// Spec is a parsed and validated flow file. It also travels inside events as
// JSON, so its JSON form is a wire format.
type Spec struct {
	// Name identifies the flow; it must satisfy ValidID.
	Name string `yaml:"name" json:"name"`
	// Repo is a git URL, or an absolute local path after Parse.
	Repo string `yaml:"repo" json:"repo"`
	// Base is the revision (branch, tag or sha) tasks start from. Parse sets
	// DefaultBase when the file names none; Validate treats "" the same way.
	Base string `yaml:"base" json:"base"`
	// Runtime is the default runtime for tasks that do not name one.
	Runtime string `yaml:"runtime" json:"runtime"`
	// Timeout is the default per-task wall-clock limit; 0 means the
	// configured default.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// Tasks are kept in file order, which breaks ties everywhere an order is
	// needed.
	Tasks []Task `yaml:"tasks" json:"tasks"`
}

// Task is one agent run in a flow.
type Task struct {
	// ID must satisfy ValidID and be unique in the flow.
	ID string `yaml:"id" json:"id"`
	// Prompt is handed to the runtime as written.
	Prompt string `yaml:"prompt" json:"prompt"`
	// DependsOn lists ids of tasks whose results this task starts from.
	// Parse leaves it nil rather than empty, so a Spec survives a JSON
	// round trip unchanged.
	DependsOn []string `yaml:"depends_on" json:"depends_on,omitempty"`
	// Runtime overrides Spec.Runtime.
	Runtime string `yaml:"runtime" json:"runtime,omitempty"`
	// Timeout overrides Spec.Timeout.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// RuntimeFor returns the task's runtime, or the flow default.
func (s *Spec) RuntimeFor(t *Task) string {
	if t.Runtime != "" {
		return t.Runtime
	}
	return s.Runtime
}

// Task returns the task with that id. It scans the list: flows are small,
// and a Spec stays a plain value that is safe to share and copy.
func (s *Spec) Task(id string) (*Task, bool) {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return &s.Tasks[i], true
		}
	}
	return nil, false
}

// TopoOrder returns the task ids in a deterministic topological order: at
// each step it takes the earliest task in file order whose dependencies have
// all been taken. On a Spec that failed validation it still returns every
// task once: unknown dependencies are ignored, and tasks left on a cycle are
// appended in file order.
func (s *Spec) TopoOrder() []string {
	g := s.graph()
	n := len(s.Tasks)
	order := make([]string, 0, n)
	pending := make([]int, n) // unmet dependencies per task
	ready := &indexHeap{}
	for i := range n {
		pending[i] = len(g.deps[i])
		if pending[i] == 0 {
			heap.Push(ready, i)
		}
	}
	done := make([]bool, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		done[i] = true
		order = append(order, s.Tasks[i].ID)
		for _, j := range g.dependents[i] {
			if pending[j]--; pending[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	for i := range n {
		if !done[i] {
			order = append(order, s.Tasks[i].ID)
		}
	}
	return order
}

// Dependents returns, for each task id, the ids of the tasks that depend on
// it directly, in file order. Every task id is a key; leaves map to nil.
func (s *Spec) Dependents() map[string][]string {
	g := s.graph()
	out := make(map[string][]string, len(s.Tasks))
	for i := range s.Tasks {
		id := s.Tasks[i].ID
		if _, seen := out[id]; seen {
			continue // duplicate id in an invalid spec: keep the first
		}
		var ids []string
		for _, j := range g.dependents[i] {
			ids = append(ids, s.Tasks[j].ID)
		}
		out[id] = ids
	}
	return out
}

// graph is the dependency graph by task index. It tolerates invalid specs:
// edges to unknown tasks, self edges and repeated edges are dropped, and a
// duplicated id resolves to its first task.
type graph struct {
	deps       [][]int // deps[i]: tasks i depends on, in depends_on order
	dependents [][]int // dependents[i]: tasks depending on i, in file order
}

func (s *Spec) graph() graph {
	n := len(s.Tasks)
	index := make(map[string]int, n)
	for i := range s.Tasks {
		if _, dup := index[s.Tasks[i].ID]; !dup {
			index[s.Tasks[i].ID] = i
		}
	}
	g := graph{deps: make([][]int, n), dependents: make([][]int, n)}
	for i := range s.Tasks {
		seen := make(map[int]bool, len(s.Tasks[i].DependsOn))
		for _, dep := range s.Tasks[i].DependsOn {
			j, ok := index[dep]
			if !ok || j == i || seen[j] {
				continue
			}
			seen[j] = true
			g.deps[i] = append(g.deps[i], j)
			// i grows monotonically, so each dependents list is in file order.
			g.dependents[j] = append(g.dependents[j], i)
		}
	}
	return g
}

// indexHeap is a min-heap of task indexes: the earliest ready task in file
// order comes out first.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
