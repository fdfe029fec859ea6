package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// BenchmarkStatusPages measures what an operator's reads of a big flow
// cost, through the real API (an embedded nats-server, the controller's
// fold into Pebble, request/reply with the transfers store for what does
// not fit a message) and the real console: one flow of
// DROVER_BENCH_STATUS_TASKS tasks (10,000; a flow may have 100,000; 40 %
// scheduled, 10 % running, half succeeded) beside DROVER_BENCH_STATUS_FLOWS
// flows of 100 tasks (1,000): 110,000 tasks in all.
//
//   - page_ms: `status FLOW`, its first page of 100 tasks and the flow's
//     summary; running_page_ms the first page of its running tasks;
//     watch_poll_ms what `watch` asks each time (a page of up to 1,000
//     active tasks); walk_ms every task, a page of 1,000 at a time
//     (`status FLOW --all`);
//   - whole_ms: the flow in one answer, as `status FLOW` asked for it
//     before pages (and an older client still does), up to 20,000 tasks;
//   - list_ms: `status`, the list of every flow;
//   - console_flow_ms, console_list_ms: the console's flow page (its first
//     100 tasks) and its list of flows, rendered.
func BenchmarkStatusPages(b *testing.B) {
	tasks, flows := benchEnvInt(b, "DROVER_BENCH_STATUS_TASKS", 10_000), benchEnvInt(b, "DROVER_BENCH_STATUS_FLOWS", 1000)
	js, cfg := benchNATS(b)
	big := statusWorld(b, js, cfg, tasks, flows)
	st, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := New(cfg, js, st, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.foldLoop(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			b.Error(err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer wcancel()
	if err := c.waitApplied(wctx, lastSeq(b, js)); err != nil {
		b.Fatal(err)
	}
	svc, err := c.ServeAPI(ctx, js.Conn(), func(string) bool { return true })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	con, err := newConsole(cfg, c, js.Conn(), js, st, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer con.Close()

	cl := &Client{NC: js.Conn(), Timeout: 5 * time.Minute}
	m := map[string]float64{}
	timed := func(name string, fn func() int) {
		t0 := time.Now()
		size := fn()
		m[name+"_ms"] += float64(time.Since(t0).Microseconds()) / 1000
		if size > 0 {
			m[name+"_KiB"] = float64(size) / 1024
		}
	}
	page := func(req StatusRequest) func() int {
		return func() int {
			resp, err := cl.StatusPage(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			return jsonSize(b, resp)
		}
	}
	get := func(path string) func() int {
		return func() int {
			rec := httptest.NewRecorder()
			con.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				b.Fatalf("GET %s: %d", path, rec.Code)
			}
			return rec.Body.Len()
		}
	}
	if first, err := cl.StatusPage(ctx, StatusRequest{Flow: big, Limit: 1}); err == nil {
		b.Logf("the big flow's tasks: %v, %d waiting", first.Detail.Page.Counts, first.Detail.Page.Waiting)
	}
	for b.Loop() {
		timed("page", page(StatusRequest{Flow: big, Limit: DefaultPageLimit}))
		timed("running_page", page(StatusRequest{Flow: big, Limit: DefaultPageLimit, States: []string{"running"}}))
		timed("watch_poll", page(StatusRequest{Flow: big, Limit: MaxPageLimit, States: watchStates}))
		timed("walk", func() int {
			n, size := 0, 0
			err := cl.WalkTasks(ctx, StatusRequest{Flow: big, Limit: MaxPageLimit}, func(st *StatusResponse) error {
				n += len(st.Detail.Tasks)
				size += jsonSize(b, st)
				return nil
			})
			if err != nil || n != tasks {
				b.Fatalf("walk: %d tasks of %d: %v", n, tasks, err)
			}
			return size
		})
		// A flow of 100,000 tasks is over 100 MB in one answer, more than
		// a transfer: the controller refuses it (pages are the way).
		timed("whole", func() int {
			if tasks > 20_000 {
				return 0
			}
			resp, err := cl.Status(ctx, big)
			if err != nil {
				b.Fatal(err)
			}
			return jsonSize(b, resp)
		})
		timed("list", func() int {
			resp, err := cl.Status(ctx, "")
			if err != nil || len(resp.Flows) != flows+1 {
				b.Fatalf("list: %d flows: %v", len(resp.Flows), err)
			}
			return jsonSize(b, resp)
		})
		timed("console_flow", get("/ui/flows/"+big))
		timed("console_list", get("/ui/"))
	}
	for name, v := range m {
		if strings.HasSuffix(name, "_ms") {
			v /= float64(b.N)
		}
		b.ReportMetric(v, name)
	}
}

// watchStates are what `watch` asks for each time (cmd/controller).
var watchStates = []string{"scheduled", "running", "retrying", FilterWaiting}

func jsonSize(b *testing.B, v any) int {
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

func lastSeq(b *testing.B, js jetstream.JetStream) uint64 {
	s, err := js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		b.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return info.State.LastSeq
}

// statusWorld publishes the benchmark's flows: the big one's submission
// (in parts, as the API records it), its attempts scheduled, claimed and
// reported; then the small flows, submitted. It returns the big flow's id.
func statusWorld(b *testing.B, js jetstream.JetStream, cfg *config.Config, tasks, flows int) string {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	publish := func(ev *event.Event) {
		raw, err := ev.Encode()
		if err != nil {
			b.Fatal(err)
		}
		for js.PublishAsyncPending() > 1024 {
			time.Sleep(time.Millisecond)
		}
		if _, err := js.PublishAsync(queue.EventSubject(ev.Flow, string(ev.Type)), raw, jetstream.WithMsgID(ev.ID)); err != nil {
			b.Fatal(err)
		}
	}
	submit := func(id string, n int) {
		var y strings.Builder
		fmt.Fprintf(&y, "name: status\nrepo: https://git.example.com/team/service.git\nbase: main\nruntime: claude-code\ntasks:\n")
		prompt := "Task %d of the flow, tidy up pkg/p%03d and add a greeting to its README."
		if n > 50_000 {
			prompt = "Task %d: tidy pkg/p%03d." // a flow file is at most 8 MiB
		}
		for i := range n {
			fmt.Fprintf(&y, "  - id: t%05d\n    prompt: \""+prompt+"\"\n", i, i, i%1000)
		}
		spec, err := flow.Parse("status.yaml", []byte(y.String()), flow.Options{})
		if err != nil {
			b.Fatal(err)
		}
		data, err := Accept(cfg, spec)
		if err != nil {
			b.Fatal(err)
		}
		evs, err := flowEvents(id, at, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			publish(ev)
		}
	}
	emit := func(typ event.Type, flowID, task string, epoch uint64, data any) {
		attempt := drovertype.AttemptID(flowID, task, 1)
		id := string(typ) + ":" + attempt
		if epoch > 0 {
			id = drovertype.ClaimEventID(typ, attempt, epoch)
		}
		ev, err := event.New(id, typ, at, flowID, task, attempt, epoch, data)
		if err != nil {
			b.Fatal(err)
		}
		publish(ev)
	}
	big := "big-abc123"
	submit(big, tasks)
	for i := range tasks {
		task := fmt.Sprintf("t%05d", i)
		emit(event.AttemptScheduled, big, task, 0, event.AttemptScheduledData{N: 1, Runtime: "claude-code", Pool: "default",
			Branch: drovertype.AttemptBranch(big, task, 1), Timeout: flow.Duration(30 * time.Minute)})
		if i%10 < 6 {
			emit(event.AttemptClaimed, big, task, 1, event.AttemptClaimedData{Worker: fmt.Sprintf("w%03d", i%100)})
		}
		if i%10 < 5 {
			emit(event.AttemptReported, big, task, 1, &event.Report{Success: true, DurationMS: 1000,
				Branch: drovertype.AttemptBranch(big, task, 1), Commit: sha(task)})
		}
	}
	for f := range flows {
		submit(fmt.Sprintf("small%04d-abcdef", f), 100)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	return big
}
