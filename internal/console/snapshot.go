package console

import (
	"sync"

	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// snapshots keeps what live pages read, computed once per folded sequence
// and shared by every browser: a flow of 10,000 tasks is walked once per
// update, not once per open page, and under the projection's read lock
// only as long as the walk.
type snapshots struct {
	p Projection

	mu      sync.Mutex
	flowsAt uint64
	list    []flowSummary
	listOK  bool
	byFlow  map[string]*flowSnap
	graphs  map[string]*graphEntry
}

// flowSnap is a flow's live state at a folded sequence.
type flowSnap struct {
	at      uint64
	summary flowSummary
	tasks   []taskLive // in the flow's order, as the graph's nodes
}

// taskLive is what the graph shows of a task.
type taskLive struct {
	S int    // index in taskStates
	A int    // attempts
	E string // error class
}

// graphEntry is a flow's laid-out graph, computed once.
type graphEntry struct {
	once   sync.Once
	ids    []string
	layout *Layout
}

// cached bounds the flows whose snapshots and graphs are kept.
const (
	cachedFlows  = 64
	cachedGraphs = 16
)

func newSnapshots(p Projection) *snapshots {
	return &snapshots{p: p, byFlow: map[string]*flowSnap{}, graphs: map[string]*graphEntry{}}
}

// flows is the flows list at the latest fold.
func (s *snapshots) flows() []flowSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.p.Applied() // before reading: the state read is at least this new
	if s.listOK && s.flowsAt == at {
		return s.list
	}
	s.p.Read(func(st *projection.State) { s.list = flowList(st) })
	s.flowsAt, s.listOK = at, true
	return s.list
}

// flow is one flow's live state at the latest fold, nil if there is no
// such flow.
func (s *snapshots) flow(flowID string) *flowSnap {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.p.Applied()
	if f := s.byFlow[flowID]; f != nil && f.at == at {
		return f
	}
	var snap *flowSnap
	s.p.Read(func(st *projection.State) {
		f := st.Flows[flowID]
		if f == nil {
			return
		}
		snap = &flowSnap{at: at, summary: summarize(st, f), tasks: make([]taskLive, len(f.Order))}
		for i, id := range f.Order {
			t := st.Task(f.ID, id)
			if t == nil {
				continue
			}
			tl := taskLive{S: stateIndex(t.State), A: t.Attempts}
			if e := taskError(st, t); e != nil {
				tl.E = string(e.Class)
			}
			snap.tasks[i] = tl
		}
	})
	if snap == nil {
		return nil
	}
	if len(s.byFlow) >= cachedFlows {
		clear(s.byFlow)
	}
	s.byFlow[flowID] = snap
	return snap
}

// graph is a flow's laid-out graph, nil if there is no such flow. The
// layout runs outside the projection's lock: only the ids and
// dependencies are copied under it.
func (s *snapshots) graph(flowID string) *graphEntry {
	s.mu.Lock()
	g := s.graphs[flowID]
	if g == nil {
		if len(s.graphs) >= cachedGraphs {
			clear(s.graphs)
		}
		g = &graphEntry{}
		s.graphs[flowID] = g
	}
	s.mu.Unlock()
	g.once.Do(func() {
		var deps [][]int
		s.p.Read(func(st *projection.State) {
			f := st.Flows[flowID]
			if f == nil {
				return
			}
			g.ids = append([]string(nil), f.Order...)
			index := make(map[string]int, len(f.Order))
			for i, id := range f.Order {
				index[id] = i
			}
			deps = make([][]int, len(f.Order))
			for i, id := range f.Order {
				if t := st.Task(f.ID, id); t != nil {
					for _, d := range t.DependsOn {
						if j, ok := index[d]; ok {
							deps[i] = append(deps[i], j)
						}
					}
				}
			}
		})
		if g.ids != nil {
			g.layout = NewLayout(len(g.ids), deps)
		}
	})
	if g.layout == nil {
		s.mu.Lock()
		if s.graphs[flowID] == g {
			delete(s.graphs, flowID) // no such flow yet: ask again next time
		}
		s.mu.Unlock()
		return nil
	}
	return g
}
