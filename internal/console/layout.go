package console

import (
	"cmp"
	"slices"
)

// Layout is a flow's task graph placed for drawing: tasks in layers from
// left to right (a task's layer is the longest chain of dependencies
// before it), ordered within each layer to cross few edges.
//
// It is computed once per flow (the graph of a submitted flow never
// changes) and only states are overlaid afterwards: see graphCache.
type Layout struct {
	// X and Y are each task's top-left corner, in the order of the tasks
	// given to NewLayout.
	X, Y []int
	// Layer is each task's layer.
	Layer []int
	// Edges go from a dependency to its dependent; Via are the points a
	// long edge passes through, one per layer it crosses, so that it runs
	// between the tasks of those layers rather than through them.
	Edges []LayoutEdge
	// Width and Height bound the drawing.
	Width, Height int
	// Crossings counts the edge crossings between adjacent layers of the
	// final order (long edges counted through their points).
	Crossings int
}

// LayoutEdge is one dependency drawn as an edge.
type LayoutEdge struct {
	From, To int
	Via      []Point
}

// Point is a point of the drawing.
type Point struct{ X, Y int }

// The geometry of the drawing, in pixels at zoom 1.
const (
	NodeW  = 160 // a task's box
	NodeH  = 28
	gapX   = 80 // between layers
	gapY   = 12 // between tasks of a layer
	colW   = NodeW + gapX
	rowH   = NodeH + gapY
	margin = 20
)

// layoutSweeps bounds the barycenter sweeps (each a pass down and a pass
// up the layers); ordering stops earlier when a sweep finds no fewer
// crossings.
const layoutSweeps = 8

// maxDummies bounds the points long edges get, as a multiple of the
// tasks: a flow whose every task depends on one far upstream would
// otherwise make the layout quadratic. Edges beyond it are drawn straight.
const maxDummies = 8

// NewLayout lays out a DAG of n tasks; deps[i] lists the indices of the
// tasks task i depends on, all before i (ids in dependency order, as
// projection.Flow.Order is). An index out of range or not before i is
// ignored: the flow was validated, and the drawing must not fail on it.
func NewLayout(n int, deps [][]int) *Layout {
	l := &Layout{X: make([]int, n), Y: make([]int, n), Layer: make([]int, n)}
	if n == 0 {
		return l
	}
	// Longest-path layers: every dependency is in an earlier layer.
	layers := 0
	for i := range n {
		for _, d := range deps[i] {
			if d >= 0 && d < i {
				l.Layer[i] = max(l.Layer[i], l.Layer[d]+1)
			}
		}
		layers = max(layers, l.Layer[i]+1)
	}
	g := newLayered(n, layers, l.Layer)
	budget := maxDummies*n + 1000
	for i := range n {
		for _, d := range deps[i] {
			if d < 0 || d >= i {
				continue
			}
			g.addEdge(d, i, &budget)
		}
	}
	g.order()
	g.place()
	for v := range n {
		l.X[v], l.Y[v] = g.x(v), g.y[v]
	}
	for _, e := range g.edges {
		le := LayoutEdge{From: e.from, To: e.to}
		for _, d := range e.via {
			le.Via = append(le.Via, Point{X: g.x(d) + NodeW/2, Y: g.y[d] + NodeH/2})
		}
		l.Edges = append(l.Edges, le)
	}
	for v := range g.layer {
		l.Width = max(l.Width, g.x(v)+NodeW+margin)
		l.Height = max(l.Height, g.y[v]+NodeH+margin)
	}
	l.Crossings = g.crossings()
	return l
}

// layered is the graph being laid out: the tasks, then one dummy vertex
// per layer a long edge crosses.
type layered struct {
	layer []int     // per vertex
	pos   []int     // per vertex: its index in its layer
	rows  [][]int   // per layer: its vertices in order
	up    [][]int   // per vertex: neighbours in the layer before
	down  [][]int   // per vertex: neighbours in the layer after
	y     []int     // per vertex, after place
	key   []float64 // per vertex: its barycenter, while its layer is sorted
	edges []layeredEdge
}

type layeredEdge struct {
	from, to int
	via      []int // dummy vertices, in layer order
}

func newLayered(n, layers int, layer []int) *layered {
	g := &layered{layer: slices.Clone(layer), rows: make([][]int, layers),
		up: make([][]int, n), down: make([][]int, n)}
	for v := range n {
		g.rows[layer[v]] = append(g.rows[layer[v]], v)
	}
	return g
}

// addEdge adds the edge u -> v, through dummies while the budget lasts.
func (g *layered) addEdge(u, v int, budget *int) {
	e := layeredEdge{from: u, to: v}
	span := g.layer[v] - g.layer[u]
	prev := u
	if span > 1 && *budget >= span-1 {
		*budget -= span - 1
		for l := g.layer[u] + 1; l < g.layer[v]; l++ {
			d := len(g.layer)
			g.layer = append(g.layer, l)
			g.up = append(g.up, nil)
			g.down = append(g.down, nil)
			g.rows[l] = append(g.rows[l], d)
			g.link(prev, d)
			e.via = append(e.via, d)
			prev = d
		}
	}
	if span == 1 || len(e.via) > 0 {
		g.link(prev, v)
	}
	g.edges = append(g.edges, e)
}

func (g *layered) link(a, b int) {
	g.down[a] = append(g.down[a], b)
	g.up[b] = append(g.up[b], a)
}

func (g *layered) x(v int) int { return margin + g.layer[v]*colW }

// order reduces crossings by barycenter ordering: each layer sorted by the
// mean position of its neighbours in the layer before (going down) or
// after (going up), keeping the best order seen.
func (g *layered) order() {
	g.pos = make([]int, len(g.layer))
	g.key = make([]float64, len(g.layer))
	g.renumber()
	best, bestRows := g.crossings(), cloneRows(g.rows)
	for range layoutSweeps {
		for l := 1; l < len(g.rows); l++ {
			g.sortBy(l, g.up)
		}
		for l := len(g.rows) - 2; l >= 0; l-- {
			g.sortBy(l, g.down)
		}
		c := g.crossings()
		if c >= best {
			break
		}
		best, bestRows = c, cloneRows(g.rows)
	}
	g.rows = bestRows
	g.renumber()
}

func cloneRows(rows [][]int) [][]int {
	out := make([][]int, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
	}
	return out
}

func (g *layered) renumber() {
	for _, row := range g.rows {
		for i, v := range row {
			g.pos[v] = i
		}
	}
}

// sortBy orders layer l by the barycenters of each vertex's neighbours in
// nb; a vertex without any keeps its place.
func (g *layered) sortBy(l int, nb [][]int) {
	row := g.rows[l]
	for _, v := range row {
		if len(nb[v]) == 0 {
			g.key[v] = float64(g.pos[v])
			continue
		}
		sum := 0
		for _, u := range nb[v] {
			sum += g.pos[u]
		}
		g.key[v] = float64(sum) / float64(len(nb[v]))
	}
	slices.SortStableFunc(row, func(a, b int) int { return cmp.Compare(g.key[a], g.key[b]) })
	for i, v := range row {
		g.pos[v] = i
	}
}

// crossings counts the crossings between every two adjacent layers, each
// in O(E log V) by counting inversions (Barth, Jünger and Mutzel). The
// edges come sorted by their upper end as the row is walked in order; only
// each vertex's own few lower ends are sorted.
func (g *layered) crossings() int {
	total := 0
	var ends, tree []int
	for l := 0; l+1 < len(g.rows); l++ {
		tree = slices.Grow(tree[:0], len(g.rows[l+1])+1)[:len(g.rows[l+1])+1] // Fenwick tree over positions
		clear(tree)
		seen := 0
		for _, u := range g.rows[l] {
			ends = ends[:0]
			for _, v := range g.down[u] {
				ends = append(ends, g.pos[v])
			}
			slices.Sort(ends)
			for _, p := range ends {
				// Edges seen so far that end right of this one cross it.
				le := 0
				for j := p + 1; j > 0; j -= j & -j {
					le += tree[j]
				}
				total += seen - le
				seen++
				for j := p + 1; j < len(tree); j += j & -j {
					tree[j]++
				}
			}
		}
	}
	return total
}

// place gives every vertex its y: rows in order, each vertex as close to
// the mean y of its neighbours as the spacing of its row allows (the
// closest such placement, by pooling adjacent violators), alternating
// passes down and up the layers.
func (g *layered) place() {
	g.y = make([]int, len(g.layer))
	for _, row := range g.rows {
		for i, v := range row {
			g.y[v] = margin + i*rowH
		}
	}
	for pass := range 4 {
		nb := g.up
		ls := make([]int, 0, len(g.rows))
		for l := range g.rows {
			ls = append(ls, l)
		}
		if pass%2 == 1 {
			nb = g.down
			slices.Reverse(ls)
		}
		for _, l := range ls {
			g.align(g.rows[l], nb)
		}
	}
	top := int(^uint(0) >> 1)
	for _, y := range g.y {
		top = min(top, y)
	}
	for v := range g.y {
		g.y[v] += margin - top
	}
}

// align moves a row's vertices towards their neighbours' mean y, keeping
// their order and rowH between them: the least-squares solution, found by
// pool-adjacent-violators on y - i*rowH.
func (g *layered) align(row []int, nb [][]int) {
	if len(row) == 0 {
		return
	}
	type block struct {
		sum   float64
		n     int
		start int
	}
	blocks := make([]block, 0, len(row))
	for i, v := range row {
		want := float64(g.y[v])
		if len(nb[v]) > 0 {
			s := 0
			for _, u := range nb[v] {
				s += g.y[u]
			}
			want = float64(s) / float64(len(nb[v]))
		}
		blocks = append(blocks, block{sum: want - float64(i*rowH), n: 1, start: i})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/float64(a.n) <= b.sum/float64(b.n) {
				break
			}
			blocks = blocks[:len(blocks)-2]
			blocks = append(blocks, block{sum: a.sum + b.sum, n: a.n + b.n, start: a.start})
		}
	}
	for _, b := range blocks {
		z := b.sum / float64(b.n)
		for i := b.start; i < b.start+b.n; i++ {
			g.y[row[i]] = int(z+0.5) + i*rowH
		}
	}
}
