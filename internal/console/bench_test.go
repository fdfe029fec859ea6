package console

import (
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-dev/drover/internal/console/browsertest"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// bigWorld is a world with one flow of n tasks, each depending on up to
// two of the 40 before it, a tenth of them already run.
func bigWorld(tb testing.TB, n int) (*world, string, []string) {
	w := newWorld(tb)
	flowID := "big-abc123"
	rng := rand.New(rand.NewPCG(7, 8))
	ids := make([]string, n)
	deps := map[string][]string{}
	for i := range n {
		ids[i] = fmt.Sprintf("task-%05d", i)
		for range rng.IntN(3) {
			if i > 0 {
				d := ids[i-1-rng.IntN(min(i, 40))]
				if len(deps[ids[i]]) == 0 || deps[ids[i]][0] != d {
					deps[ids[i]] = append(deps[ids[i]], d)
				}
			}
		}
	}
	w.submit(flowID, ids, deps, func(id string) string { return "work on " + id })
	var evs []*event.Event
	for i := 0; i < n; i += 10 {
		a := drovertype.AttemptID(flowID, ids[i], 1)
		evs = append(evs, w.ev(event.AttemptScheduled, flowID, ids[i], a, 0, event.AttemptScheduledData{N: 1, Runtime: "demo", Pool: "default", Branch: drovertype.AttemptBranch(flowID, ids[i], 1)}))
	}
	w.fold(evs...)
	return w, flowID, ids
}

// BenchmarkFlowPage10k measures the server's side of a 10,000-task flow's
// page: laying out the graph (once per flow), encoding it with the
// tasks' states, rendering the page's HTML (its first 100 tasks) and a
// live snapshot. DROVER_BENCH_CONSOLE_TASKS sets the flow's size.
func BenchmarkFlowPage10k(b *testing.B) {
	w, flowID, _ := bigWorld(b, benchConsoleTasks())
	c, err := New(Options{Projection: w, Folds: w, Artifacts: w, Now: w.clock})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var layout, graph, page, snap time.Duration
	var graphBytes, gzipBytes, pageBytes int
	for b.Loop() {
		c.cache = newSnapshots(w) // a flow never seen: the layout is part of it
		t0 := time.Now()
		c.cache.graph(flowID)
		layout += time.Since(t0)

		t0 = time.Now()
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/flows/"+flowID+"/graph.json", nil))
		graph += time.Since(t0)
		graphBytes = rec.Body.Len()
		req := httptest.NewRequest("GET", "/ui/flows/"+flowID+"/graph.json", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec = httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		gzipBytes = rec.Body.Len()

		t0 = time.Now()
		rec = httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/flows/"+flowID, nil))
		page += time.Since(t0)
		pageBytes = rec.Body.Len()
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}

		t0 = time.Now()
		w.fold(w.ev(event.FlowPaused, flowID, "", "", 0, event.OperatorData{})) // a new sequence: not cached
		c.cache.flow(flowID)
		snap += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(layout.Milliseconds())/n, "layout_ms")
	b.ReportMetric(float64(graph.Milliseconds())/n, "graph_json_ms")
	b.ReportMetric(float64(page.Milliseconds())/n, "page_html_ms")
	b.ReportMetric(float64(snap.Microseconds())/n/1000, "snapshot_ms")
	b.ReportMetric(float64(graphBytes)/1024, "graph_KiB")
	b.ReportMetric(float64(gzipBytes)/1024, "graph_gzip_KiB")
	b.ReportMetric(float64(pageBytes)/1024, "page_KiB")
}

// BenchmarkConsoleBrowser10k loads a 10,000-task flow's page in headless
// Chromium (load_ms: from navigating to the graph drawn with the live
// stream's first states), then folds a state change of every task, in
// commits of 256 as fast as the fold can (fold_ms), and measures how long
// after the last commit the page has them all (lag_ms).
func BenchmarkConsoleBrowser10k(b *testing.B) {
	if testing.Short() {
		b.Skip("a browser benchmark")
	}
	n := benchConsoleTasks()
	br := browsertest.New(b)
	var load, fold, lag time.Duration
	for i := 0; b.Loop(); i++ {
		w, flowID, ids := bigWorld(b, n)
		c, err := New(Options{Projection: w, Folds: w, Artifacts: w, Now: w.clock})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(c)
		if i == 0 { // a warm browser, as a user's is
			if err := br.Do(60*time.Second, chromedp.Navigate(srv.URL+"/ui/")); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := br.Do(60*time.Second, chromedp.Navigate(srv.URL+"/ui/flows/"+flowID)); err != nil {
			b.Fatal(err)
		}
		if err := br.WaitTrue(60*time.Second, `document.getElementById('graph').dataset.ready === '1' && window.droverTaskLog === null`); err != nil {
			b.Fatal(err)
		}
		load += time.Since(t0)

		want := stateIndex(drovertype.TaskRetrying)
		if _, err := browsertest.Eval[bool](br, `window.droverSeen = new Set(),
			document.addEventListener('drover:tasks', e => { for (const t of e.detail) if (t[1] === `+strconv.Itoa(want)+`) window.droverSeen.add(t[0]) }), true`); err != nil {
			b.Fatal(err)
		}
		// Every task: scheduled, claimed, reported failed, a retry
		// scheduled; only the last is looked for.
		t0 = time.Now()
		var batch []*event.Event
		for _, id := range ids {
			a := drovertype.AttemptID(flowID, id, 1)
			if _, err := strconv.Atoi(id[len(id)-1:]); err == nil && id[len(id)-1] != '0' {
				batch = append(batch, w.ev(event.AttemptScheduled, flowID, id, a, 0, event.AttemptScheduledData{N: 1, Runtime: "demo", Pool: "default", Branch: drovertype.AttemptBranch(flowID, id, 1)}))
			}
			batch = append(batch,
				w.ev(event.AttemptClaimed, flowID, id, a, 1, event.AttemptClaimedData{Worker: "w"}),
				w.ev(event.AttemptReported, flowID, id, a, 1, &event.Report{Error: &event.ErrorInfo{Class: "RATE_LIMITED"}}),
				w.ev(event.RuntimeRecoveryScheduled, flowID, id, a, 0, event.RuntimeRecoveryScheduledData{N: 2, Runtime: "demo", Strategy: drovertype.StrategySameRuntime}))
			if len(batch) >= 256 {
				w.fold(batch...)
				batch = batch[:0]
			}
		}
		w.fold(batch...)
		fold += time.Since(t0)
		t1 := time.Now()
		if err := br.WaitTrue(120*time.Second, `window.droverSeen.size === `+strconv.Itoa(n)); err != nil {
			b.Fatal(err)
		}
		lag += time.Since(t1)
		c.Close() // ends the page's stream, which srv.Close would wait for
		srv.Close()
	}
	nn := float64(b.N)
	b.ReportMetric(float64(load.Milliseconds())/nn, "load_ms")
	b.ReportMetric(float64(fold.Milliseconds())/nn, "fold_ms")
	b.ReportMetric(float64(lag.Milliseconds())/nn, "lag_ms")
}

// benchConsoleTasks is the size of the benchmarks' flow:
// DROVER_BENCH_CONSOLE_TASKS, 10,000 unless set.
func benchConsoleTasks() int {
	if n, err := strconv.Atoi(envOr("DROVER_BENCH_CONSOLE_TASKS", "")); err == nil && n > 0 {
		return n
	}
	return 10_000
}

func envOr(name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
