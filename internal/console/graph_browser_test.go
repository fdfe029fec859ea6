package console

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-dev/drover/internal/console/browsertest"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// TestBrowserDrawsALargeFlowInView: the graph of a long flow, fitted, is a
// thin strip in a view of mostly empty space; a frame walks the hit-test
// grid only within the graph (walking the whole view took half a minute a
// frame at 100,000 tasks), and still draws every task. A click on a task
// shows it, in the state the live stream last gave it.
func TestBrowserDrawsALargeFlowInView(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test")
	}
	const n = 12_000
	w, flowID, ids := bigWorld(t, n)
	c, err := New(Options{Projection: w, Folds: w, Artifacts: w, Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	defer c.Close() // ends the page's stream, which srv.Close would wait for
	br := browsertest.New(t)
	if err := br.Do(60*time.Second, chromedp.Navigate(srv.URL+"/ui/flows/"+flowID)); err != nil {
		t.Fatal(err)
	}
	if err := br.WaitTrue(60*time.Second, `document.getElementById('graph').dataset.ready === '1'`); err != nil {
		t.Fatal(err)
	}
	g := fetchGraph(t, srv.URL+"/ui/flows/"+flowID+"/graph.json")
	bw, bh, _, _ := graphBox(t, br)
	k := min(bw/max(g.W, 1), bh/max(g.H, 1), 1.5)
	within := (math.Floor(g.W/graphCell) + 1) * (math.Floor(g.H/graphCell) + 1)
	whole := (math.Floor(bw/k/graphCell) + 2) * (math.Floor(bh/k/graphCell) + 2)
	if whole < 10*within {
		t.Fatalf("the fitted view is %.0f cells, the graph %.0f: not the long flow this test is about", whole, within)
	}
	cells, err := browsertest.Eval[string](br, `document.getElementById('graph').dataset.cells`)
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := browsertest.Eval[string](br, `document.getElementById('graph').dataset.drawn`)
	if err != nil {
		t.Fatal(err)
	}
	if walked, _ := strconv.ParseFloat(cells, 64); walked == 0 || walked > within {
		t.Errorf("a frame walked %s cells, the graph has %.0f (the view %.0f)", cells, within, whole)
	}
	if drawn != strconv.Itoa(n) {
		t.Errorf("%s tasks drawn when fitted, want %d", drawn, n)
	}

	// The first task is scheduled; a click on it says so, and says running
	// once the live stream has brought its claim.
	click := func() string {
		t.Helper()
		if _, err := browsertest.Eval[bool](br, `document.getElementById('graph-info').hidden = true`); err != nil {
			t.Fatal(err)
		}
		x, y := taskOnScreen(t, br, srv.URL+"/ui/flows/"+flowID+"/graph.json", 0)
		if err := br.Do(10*time.Second, chromedp.MouseClickXY(x, y)); err != nil {
			t.Fatal(err)
		}
		if err := br.WaitTrue(10*time.Second, `!document.getElementById('graph-info').hidden`); err != nil {
			t.Fatal(err)
		}
		info, _ := browsertest.Eval[string](br, `document.getElementById('graph-info').textContent`)
		return info
	}
	if info := click(); !strings.HasPrefix(info, ids[0]+"scheduled") {
		t.Errorf("clicked the first task: %q", info)
	}
	a := drovertype.AttemptID(flowID, ids[0], 1)
	w.fold(w.ev(event.AttemptClaimed, flowID, ids[0], a, 1, event.AttemptClaimedData{Worker: "w"}))
	deadline := time.Now().Add(20 * time.Second)
	for info := click(); !strings.HasPrefix(info, ids[0]+"running"); info = click() {
		if time.Now().After(deadline) {
			t.Fatalf("the first task after its claim: %q", info)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("script errors: %q", errs)
	}
}

// graphCell is graph.js's hit-test grid cell, in graph pixels.
const graphCell = 200

// shownGraph is what graph.js places tasks by.
type shownGraph struct {
	W  float64   `json:"w"`
	H  float64   `json:"h"`
	NW float64   `json:"nw"`
	NH float64   `json:"nh"`
	X  []float64 `json:"x"`
	Y  []float64 `json:"y"`
}

func fetchGraph(t *testing.T, url string) *shownGraph {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g shownGraph
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// graphBox is the graph's box: its size, and where its drawing is.
func graphBox(t *testing.T, br *browsertest.Browser) (w, h, left, top float64) {
	t.Helper()
	box, err := browsertest.Eval[string](br, `(() => { const b = document.getElementById('graph'), r = document.getElementById('graph-svg').getBoundingClientRect();
		return JSON.stringify([b.clientWidth, b.clientHeight, r.left, r.top]) })()`)
	if err != nil {
		t.Fatal(err)
	}
	var v [4]float64
	if err := json.Unmarshal([]byte(box), &v); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", box, err))
	}
	return v[0], v[1], v[2], v[3]
}

// taskOnScreen is where the page shows task i of the graph, fitted as the
// page first draws it (graph.js's fit).
func taskOnScreen(t *testing.T, br *browsertest.Browser, graphURL string, i int) (float64, float64) {
	t.Helper()
	g := fetchGraph(t, graphURL)
	bw, bh, left, top := graphBox(t, br)
	k := min(bw/max(g.W, 1), bh/max(g.H, 1), 1.5)
	tx, ty := (bw-g.W*k)/2, max(0, (bh-g.H*k)/2)
	return left + tx + (g.X[i]+g.NW/2)*k, top + ty + (g.Y[i]+g.NH/2)*k
}
