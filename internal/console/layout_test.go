package console

import (
	"math/rand/v2"
	"testing"
)

func TestLayoutLayersAreLongestPaths(t *testing.T) {
	// a -> b -> c, a -> c, d alone; e depends on d and c.
	deps := [][]int{{}, {0}, {0, 1}, {}, {3, 2}}
	l := NewLayout(5, deps)
	want := []int{0, 1, 2, 0, 3}
	for i, w := range want {
		if l.Layer[i] != w {
			t.Errorf("task %d: layer %d, want %d", i, l.Layer[i], w)
		}
	}
	checkLayout(t, l, deps)
	// a -> c spans two layers: one point between them; d -> e spans three.
	for _, e := range l.Edges {
		span := l.Layer[e.To] - l.Layer[e.From]
		if len(e.Via) != span-1 {
			t.Errorf("edge %d->%d spans %d layers but has %d points", e.From, e.To, span, len(e.Via))
		}
	}
}

func TestLayoutUntanglesCrossings(t *testing.T) {
	// Layer 0: a, b; layer 1: c (on b), d (on a); layer 2: e (on c), f (on d).
	// In the given order every pair of edges crosses; ordered, none does.
	deps := [][]int{{}, {}, {1}, {0}, {3}, {2}}
	l := NewLayout(6, deps)
	if l.Crossings != 0 {
		t.Fatalf("crossings = %d, want 0", l.Crossings)
	}
	checkLayout(t, l, deps)
}

func TestLayoutReducesCrossingsOfRandomDAGs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n := 50 + rng.IntN(300)
		deps := randomDAG(rng, n, 3)
		l := NewLayout(n, deps)
		checkLayout(t, l, deps)
		// The crossings of the layers in the given order, as a baseline.
		g := unordered(l, deps, nil)
		if before := g.crossings(); l.Crossings > before {
			t.Errorf("trial %d: %d crossings after ordering, %d before", trial, l.Crossings, before)
		}
	}
}

func TestLayoutIgnoresBadDependencies(t *testing.T) {
	// A self edge, a forward edge and out-of-range indices draw nothing.
	l := NewLayout(3, [][]int{{0, 2, -1, 7}, {0}, {1}})
	if len(l.Edges) != 2 || l.Layer[2] != 2 {
		t.Fatalf("edges %v layers %v", l.Edges, l.Layer)
	}
	if l := NewLayout(0, nil); l.Width != 0 || len(l.X) != 0 {
		t.Fatalf("empty layout: %+v", l)
	}
}

func TestLayoutBoundsLongEdgePoints(t *testing.T) {
	// A chain of n with every task also depending on the first: n^2/2
	// points unbounded.
	n := 2000
	deps := make([][]int, n)
	for i := 1; i < n; i++ {
		deps[i] = []int{i - 1, 0}
	}
	l := NewLayout(n, deps)
	points := 0
	for _, e := range l.Edges {
		points += len(e.Via)
	}
	if points > maxDummies*n+1000 {
		t.Fatalf("%d points for %d tasks", points, n)
	}
	checkLayout(t, l, deps)
}

// checkLayout checks what every layout must hold: dependencies in earlier
// layers, layers in columns, no two boxes of a layer overlapping, every
// box inside the drawing.
func checkLayout(t *testing.T, l *Layout, deps [][]int) {
	t.Helper()
	byLayer := map[int][]int{}
	for i := range l.X {
		for _, d := range deps[i] {
			if d >= 0 && d < i && l.Layer[d] >= l.Layer[i] {
				t.Errorf("task %d (layer %d) depends on %d (layer %d)", i, l.Layer[i], d, l.Layer[d])
			}
		}
		if l.X[i] != margin+l.Layer[i]*colW {
			t.Errorf("task %d: x %d not its layer's column", i, l.X[i])
		}
		if l.X[i] < 0 || l.Y[i] < 0 || l.X[i]+NodeW > l.Width || l.Y[i]+NodeH > l.Height {
			t.Errorf("task %d at (%d,%d) outside %dx%d", i, l.X[i], l.Y[i], l.Width, l.Height)
		}
		byLayer[l.Layer[i]] = append(byLayer[l.Layer[i]], i)
	}
	for layer, vs := range byLayer {
		for a := range vs {
			for b := a + 1; b < len(vs); b++ {
				if d := l.Y[vs[a]] - l.Y[vs[b]]; d < NodeH && d > -NodeH {
					t.Errorf("layer %d: tasks %d and %d overlap (y %d, %d)", layer, vs[a], vs[b], l.Y[vs[a]], l.Y[vs[b]])
				}
			}
		}
	}
	for _, e := range l.Edges {
		for _, p := range e.Via {
			if p.X <= l.X[e.From] || p.X >= l.X[e.To] {
				t.Errorf("edge %d->%d: point %v not between its ends", e.From, e.To, p)
			}
		}
	}
}

func maxLayer(l *Layout) int {
	m := 0
	for _, x := range l.Layer {
		m = max(m, x)
	}
	return m
}

// randomDAG gives each task up to k dependencies among the tasks before it,
// mostly recent ones, like a real flow's.
func randomDAG(rng *rand.Rand, n, k int) [][]int {
	deps := make([][]int, n)
	for i := 1; i < n; i++ {
		for range rng.IntN(k + 1) {
			d := i - 1 - rng.IntN(min(i, 40))
			deps[i] = append(deps[i], d)
		}
	}
	return deps
}

func BenchmarkLayout10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	deps := randomDAG(rng, 10_000, 2)
	b.ReportAllocs()
	for b.Loop() {
		NewLayout(len(deps), deps)
	}
}

// TestLayoutCountsCrossings: the inversion count gives what comparing every
// two edges between adjacent layers gives, in any order of the layers.
func TestLayoutCountsCrossings(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		n := 10 + rng.IntN(120)
		deps := randomDAG(rng, n, 4)
		g := unordered(NewLayout(n, deps), deps, rng)
		want := 0
		for l := 0; l+1 < len(g.rows); l++ {
			var edges [][2]int
			for _, u := range g.rows[l] {
				for _, v := range g.down[u] {
					edges = append(edges, [2]int{g.pos[u], g.pos[v]})
				}
			}
			for i, a := range edges {
				for _, b := range edges[i+1:] {
					if (a[0]-b[0])*(a[1]-b[1]) < 0 {
						want++
					}
				}
			}
		}
		if got := g.crossings(); got != want {
			t.Fatalf("trial %d: crossings() = %d, comparing every two edges gives %d", trial, got, want)
		}
	}
}

// unordered is the layered graph of l's layers, its rows in the order the
// vertices were added, or shuffled by rng if there is one.
func unordered(l *Layout, deps [][]int, rng *rand.Rand) *layered {
	n := len(deps)
	g := newLayered(n, maxLayer(l)+1, l.Layer)
	budget := maxDummies*n + 1000
	for i := range n {
		for _, d := range deps[i] {
			g.addEdge(d, i, &budget)
		}
	}
	if rng != nil {
		for _, row := range g.rows {
			rng.Shuffle(len(row), func(i, j int) { row[i], row[j] = row[j], row[i] })
		}
	}
	g.pos = make([]int, len(g.layer))
	g.renumber()
	return g
}
