package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// foldRuns alternates, across the runs of one process, whether the fold or
// the raw consumers read the stream first.
var foldRuns int

// BenchmarkFold measures the controller's fold against the same machine's
// raw JetStream consume rate, side by side on one pre-filled EVENTS stream.
//
// The stream holds the events of complete flows of 200 tasks as Drover
// writes them (at least DROVER_BENCH_FOLD_EVENTS in all, 150,000 by default:
// 54 flows): the flow's submission with its resolved plan, then per task the
// decision and the worker's 13 lifecycle events (claim, initialize, prepare,
// start, exit, four changed files, the diff, the checkpoint, terminate, and
// the report carrying a real Claude Code transcript as its stdout tail:
// ~11 KB in all), then the integration and the completion.
//
//   - fold: the controller's fold loop (foldLoop: an ordered consumer from
//     the store's next sequence read and decoded by a goroutine of its own,
//     StageDecoded into the in-memory projection, Commit to Pebble every
//     8,192 changed records (at most 65,536 events) and when caught up,
//     the fold's metrics and trace hooks as configured: off) from an empty
//     store until it has applied the last sequence. The decision loop does not run: it acts on
//     the state, it does not read the stream.
//   - raw_ack: a pull consumer with explicit acks, the same 1,024-message
//     pull batches, acking each message and doing nothing else.
//   - raw_ordered: an ordered consumer (the fold's kind, no acks) that only
//     counts the messages.
//
// ratio = fold / raw_ack (targets: fold ≥ 50,000 events/s, ratio ≥ 0.5).
func BenchmarkFold(b *testing.B) {
	n := benchEnvInt(b, "DROVER_BENCH_FOLD_EVENTS", 150_000)
	b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchFold(b, n) })
}

func benchFold(b *testing.B, n int) {
	js, cfg := benchNATS(b)
	last, size := prefillEvents(b, js, cfg, n)

	var fold, rawAck, rawOrdered, foldCPU, rawAckCPU time.Duration
	b.ResetTimer()
	for range b.N {
		steps := []func(){
			func() {
				stop := profileFold(b)
				cpu := processCPU(b)
				fold += foldOnce(b, cfg, js, last)
				foldCPU += processCPU(b) - cpu
				stop()
			},
			func() {
				cpu := processCPU(b)
				rawAck += consumeRaw(b, js, last, true)
				rawAckCPU += processCPU(b) - cpu
			},
			func() { rawOrdered += consumeRaw(b, js, last, false) },
		}
		if foldRuns%2 == 1 {
			steps[0], steps[2] = steps[2], steps[0]
		}
		foldRuns++
		for _, step := range steps {
			step()
		}
	}
	b.StopTimer()
	events := float64(last) * float64(b.N)
	b.ReportMetric(events/fold.Seconds(), "events/s")
	b.ReportMetric(events/rawAck.Seconds(), "raw_ack_events/s")
	b.ReportMetric(events/rawOrdered.Seconds(), "raw_ordered_events/s")
	b.ReportMetric(rawAck.Seconds()/fold.Seconds(), "ratio")
	// CPU time of the whole process (the embedded server's delivery
	// included) per event: a busy machine stretches the rates, less this.
	b.ReportMetric(float64(foldCPU.Microseconds())/events, "cpu_us/event")
	b.ReportMetric(float64(rawAckCPU.Microseconds())/events, "raw_ack_cpu_us/event")
	b.ReportMetric(float64(size)/float64(last), "bytes/event")
}

// benchEnvInt is the positive integer the environment variable name holds,
// or def when it is unset.
func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileFold writes a CPU profile of the fold alone, while the raw
// consumers are not running, when DROVER_BENCH_FOLD_PROFILE names a file
// (the last run's profile is kept).
func profileFold(b *testing.B) (stop func()) {
	path := os.Getenv("DROVER_BENCH_FOLD_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchNATS is an embedded nats-server with Drover's layout, stopped when
// the benchmark ends (fsync does not matter to a reader: the server's
// default keeps a pre-fill quick), and the configuration of the fold
// benchmark's flows.
func benchNATS(b *testing.B) (jetstream.JetStream, *config.Config) {
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: b.TempDir(), Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	// Room above the generator's own bound on unacknowledged publishes
	// (4,096): the default (4,000) stalls a pre-fill on a loaded machine.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		b.Fatal(err)
	}
	if err := queue.Ensure(context.Background(), js, queue.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	return js, &config.Config{DataDir: b.TempDir(), Defaults: config.Defaults{Pool: "default"},
		Queue:    config.Queue{AckWait: 30 * time.Second},
		Runtimes: map[string]config.Runtime{"claude-code": {Binary: "claude"}}}
}

// foldOnce folds the whole stream into a fresh store and returns how long
// it took from starting the fold loop to the last sequence applied.
func foldOnce(b *testing.B, cfg *config.Config, js jetstream.JetStream, last uint64) time.Duration {
	store, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	took := foldStore(b, cfg, js, store, last)
	var flows, poison int
	store.Read(func(st *projection.State) {
		for _, f := range st.Flows {
			if f.State == drovertype.FlowSucceeded {
				flows++
			}
		}
		poison = len(st.Poisons)
	})
	if poison > 0 || flows == 0 {
		b.Fatalf("fold: %d flows succeeded, %d poison events: the generated log is not what Drover writes", flows, poison)
	}
	return took
}

// foldStore runs a controller's fold loop on store until it has applied
// last, and returns how long that took from the loop's start.
func foldStore(b *testing.B, cfg *config.Config, js jetstream.JetStream, store *store.Store, last uint64) time.Duration {
	c := New(cfg, js, store, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	began := time.Now()
	go func() { errc <- c.foldLoop(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	err := c.waitApplied(wctx, last)
	took := time.Since(began)
	wcancel()
	cancel()
	if ferr := <-errc; ferr != nil {
		b.Fatal(ferr)
	}
	if err != nil {
		b.Fatalf("fold: %v (applied %d of %d)", err, store.Applied(), last)
	}
	return took
}

// consumeRaw reads the whole stream with a consumer that does nothing with
// the messages: acked one by one (explicit acks), or an ordered consumer.
func consumeRaw(b *testing.B, js jetstream.JetStream, last uint64, ack bool) time.Duration {
	ctx := context.Background()
	began := time.Now()
	var cons jetstream.Consumer
	var err error
	if ack {
		cons, err = js.CreateConsumer(ctx, queue.EventsStream, jetstream.ConsumerConfig{
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	} else {
		cons, err = js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		b.Fatal(err)
	}
	for got := uint64(0); got < last; got++ {
		msg, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if ack {
			if err := msg.Ack(); err != nil {
				b.Fatal(err)
			}
		}
	}
	took := time.Since(began)
	it.Stop()
	if ack {
		if err := js.DeleteConsumer(ctx, queue.EventsStream, cons.CachedInfo().Name); err != nil {
			b.Fatal(err)
		}
	}
	return took
}

// prefillEvents publishes complete flows of 200 tasks until at least n
// events are on the stream; it returns the last sequence and the bytes
// published.
func prefillEvents(b *testing.B, js jetstream.JetStream, cfg *config.Config, n int) (uint64, int64) {
	transcript, err := os.ReadFile("../../testdata/transcripts/claude/success/stdout.txt")
	if err != nil {
		b.Fatal(err)
	}
	g := &eventGen{b: b, js: js, cfg: cfg, stdout: string(transcript), at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for f := 0; g.count < n; f++ {
		g.flow(fmt.Sprintf("bench%d-abcdef", f), 200)
	}
	return g.published(), g.bytes
}

// published waits until every event g published is acknowledged, and
// returns the stream's last sequence.
func (g *eventGen) published() uint64 {
	select {
	case <-g.js.PublishAsyncComplete():
	case <-time.After(10 * time.Minute):
		g.b.Fatal("pre-fill: publishes not acknowledged")
	}
	s, err := g.js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		g.b.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		g.b.Fatal(err)
	}
	if info.State.Msgs != uint64(g.count) {
		g.b.Fatalf("pre-fill: %d messages on the stream, published %d", info.State.Msgs, g.count)
	}
	return info.State.LastSeq
}

// eventGen writes the events Drover writes for a flow of independent tasks
// that all succeed, with payloads of realistic size.
type eventGen struct {
	b  *testing.B
	js jetstream.JetStream
	// kept, when not nil, keeps the messages instead of publishing them.
	kept   *[]keptEvent
	cfg    *config.Config
	stdout string // the CLI's stdout, as a report's tail keeps it
	at     time.Time
	count  int
	bytes  int64
}

func (g *eventGen) emit(id string, typ event.Type, flowID, task, attempt string, epoch uint64, data any) {
	g.at = g.at.Add(time.Millisecond)
	ev, err := event.New(id, typ, g.at, flowID, task, attempt, epoch, data)
	if err != nil {
		g.b.Fatal(err)
	}
	g.emitEvent(ev)
}

// emitEvent publishes ev, or keeps it.
func (g *eventGen) emitEvent(ev *event.Event) {
	raw, err := ev.Encode()
	if err != nil {
		g.b.Fatal(err)
	}
	// Well below nats.go's limit of 4,000 publishes in flight, which
	// fails a publish after a 200 ms stall: on a busy machine it did.
	g.count++
	g.bytes += int64(len(raw))
	if g.kept != nil {
		*g.kept = append(*g.kept, keptEvent{queue.EventSubject(ev.Flow, string(ev.Type)), raw})
		return
	}
	for g.js.PublishAsyncPending() > 1024 {
		time.Sleep(time.Millisecond)
	}
	if _, err := g.js.PublishAsync(queue.EventSubject(ev.Flow, string(ev.Type)), raw, jetstream.WithMsgID(ev.ID)); err != nil {
		g.b.Fatal(err)
	}
}

// keptEvent is a message eventGen kept: its subject and bytes.
type keptEvent struct {
	subject string
	raw     []byte
}

// BenchmarkFoldCPU is the fold's own work per event, without NATS: the
// messages of BenchmarkFold's stream, each decoded (DecodeForFold) and
// staged in a store on disk, committed as the fold loop commits while it
// catches up (foldRecords, foldEvents), on one goroutine. One op is one event. What the
// fold loop adds is reading the stream; what BenchmarkFold adds is that
// and a busy machine's share of two cores.
func BenchmarkFoldCPU(b *testing.B) {
	transcript, err := os.ReadFile("../../testdata/transcripts/claude/success/stdout.txt")
	if err != nil {
		b.Fatal(err)
	}
	var kept []keptEvent
	cfg := &config.Config{Defaults: config.Defaults{Pool: "default"}, Runtimes: map[string]config.Runtime{"claude-code": {Binary: "claude"}}}
	g := &eventGen{b: b, cfg: cfg, kept: &kept, stdout: string(transcript), at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for f := 0; g.count < 30_000; f++ {
		g.flow(fmt.Sprintf("bench%d-abcdef", f), 200)
	}
	var st *store.Store
	seq, staged := uint64(0), 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(kept) == 0 {
			if st != nil {
				if err := st.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if st != nil {
				st.Close()
			}
			if st, err = store.Open(b.TempDir(), store.Options{}); err != nil {
				b.Fatal(err)
			}
			seq, staged = 0, 0
			b.StartTimer()
		}
		m := kept[i%len(kept)]
		seq++
		if _, ok := st.StageDecoded(seq, projection.DecodeForFold(m.subject, m.raw)); !ok {
			b.Fatalf("seq %d not staged", seq)
		}
		if staged++; staged >= foldEvents || staged%foldCheck == 0 && st.Changed() >= foldRecords {
			if err := st.Commit(); err != nil {
				b.Fatal(err)
			}
			staged = 0
		}
	}
	b.StopTimer()
	if err := st.Commit(); err != nil {
		b.Fatal(err)
	}
	st.Close()
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:20])
}

// accept parses a flow file and resolves it as the controller accepts a
// submission.
func (g *eventGen) accept(name, file string) event.FlowSubmittedData {
	spec, err := flow.Parse(name, []byte(file), flow.Options{})
	if err != nil {
		g.b.Fatal(err)
	}
	sub, err := Accept(g.cfg, spec)
	if err != nil {
		g.b.Fatal(err)
	}
	return sub
}

func (g *eventGen) flow(flowID string, tasks int) {
	var y strings.Builder
	fmt.Fprintf(&y, "name: bench\nrepo: https://git.example.com/team/service.git\nbase: main\nruntime: claude-code\ntasks:\n")
	for i := range tasks {
		fmt.Fprintf(&y, "  - id: t%04d\n    prompt: |\n      Task %d: tidy up three files and add a greeting.\n", i, i)
		for k := range 3 {
			fmt.Fprintf(&y, "      @append pkg/p%02d/file%02d.go // reviewed by task %d\n", (3*i+k)/50, (3*i+k)%50, i)
		}
	}
	g.emit("flow_submitted:"+flowID, event.FlowSubmitted, flowID, "", "", 0, g.accept("bench.yaml", y.String()))
	base := sha("base")
	var merge []event.DepResult
	for i := range tasks {
		task := fmt.Sprintf("t%04d", i)
		id := drovertype.AttemptID(flowID, task, 1)
		g.emit("attempt_scheduled:"+id, event.AttemptScheduled, flowID, task, id, 0, event.AttemptScheduledData{
			N: 1, Runtime: "claude-code", Pool: "default", Branch: drovertype.AttemptBranch(flowID, task, 1),
			Timeout: flow.Duration(30 * time.Minute)})
	}
	// Two workers: their tasks' events interleave.
	for i := 0; i < tasks; i += 2 {
		var lifecycles [][]func()
		for k := i; k < min(i+2, tasks); k++ {
			task := fmt.Sprintf("t%04d", k)
			lifecycles = append(lifecycles, g.attempt(flowID, task, fmt.Sprintf("w%d", k%2+1), base))
			merge = append(merge, event.DepResult{Task: task, Branch: drovertype.AttemptBranch(flowID, task, 1), Commit: sha(task)})
		}
		for step := range lifecycles[0] {
			for _, lc := range lifecycles {
				lc[step]()
			}
		}
	}
	intID := drovertype.IntegrationID(flowID, 1)
	g.emit(fmt.Sprintf("integration_scheduled:%s:1", flowID), event.IntegrationScheduled, flowID, "", "", 0,
		event.IntegrationScheduledData{N: 1, Branch: drovertype.IntegrationBranch(flowID, 1), Runtime: "claude-code", Pool: "default", Merge: merge})
	g.emit(fmt.Sprintf("flow_integrated:%s:1", intID), event.FlowIntegrated, flowID, "", intID, 1,
		event.FlowIntegratedData{N: 1, Branch: drovertype.IntegrationBranch(flowID, 1), Commit: sha(intID)})
	g.emit("flow_completed:"+flowID, event.FlowCompleted, flowID, "", "", 0, event.FlowCompletedData{State: drovertype.FlowSucceeded})
}

// attempt returns the steps of one successful attempt, worker side.
func (g *eventGen) attempt(flowID, task, worker, base string) []func() {
	id := drovertype.AttemptID(flowID, task, 1)
	branch := drovertype.AttemptBranch(flowID, task, 1)
	wt := "/var/lib/drover-worker/worktrees/" + id + "-e1"
	var files []string
	n, _ := strconv.Atoi(task[1:])
	for k := range 3 {
		files = append(files, fmt.Sprintf("pkg/p%02d/file%02d.go", (3*n+k)/50, (3*n+k)%50))
	}
	var diff, stat strings.Builder
	for _, f := range files {
		fmt.Fprintf(&diff, "diff --git a/%s b/%s\nindex 3b18e51..a2c4f0e 100644\n--- a/%s\n+++ b/%s\n@@ -38,3 +38,4 @@ func F%d(x int) int {\n \treturn x*3 + 7\n }\n+// reviewed by task %s\n", f, f, f, f, n, task)
		fmt.Fprintf(&stat, " %s | 1 +\n", f)
	}
	diff.WriteString("diff --git a/hello.txt b/hello.txt\nnew file mode 100644\nindex 0000000..45b983b\n--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hi\n")
	stat.WriteString(" hello.txt          | 1 +\n 4 files changed, 4 insertions(+)\n")
	commit := sha(task)
	phase := func(typ event.Type, data any) func() {
		return func() { g.emit(fmt.Sprintf("%s:%s:1", typ, id), typ, flowID, task, id, 1, data) }
	}
	file := func(path, change string) func() {
		sum := sha256.Sum256([]byte(path))
		return func() {
			g.emit(fmt.Sprintf("%s:%s:1:%s", event.FileModified, id, hex.EncodeToString(sum[:8])), event.FileModified,
				flowID, task, id, 1, event.FileModifiedData{Path: path, Change: change})
		}
	}
	return []func(){
		phase(event.AttemptClaimed, event.AttemptClaimedData{Worker: worker, Host: "worker-host-" + worker}),
		phase(event.AdapterInitialized, event.AdapterInitializedData{Adapter: "command", Binary: "/usr/local/bin/claude", Version: "2.1.197 (Claude Code)"}),
		phase(event.PrepareCompleted, event.PrepareCompletedData{Worktree: wt, Branch: branch, BaseCommit: base, Baseline: base}),
		phase(event.RuntimeStarted, event.RuntimeStartedData{Pid: 40000 + n, Argv: []string{"/usr/local/bin/claude",
			"--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "-p", "Task " + task + ": tidy up three files and add a greeting."}}),
		phase(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited", DurationMS: 48213}),
		file("hello.txt", "created"),
		file(files[0], "modified"),
		file(files[1], "modified"),
		file(files[2], "modified"),
		phase(event.DiffComputed, event.DiffComputedData{Created: []string{"hello.txt"}, Modified: files,
			Stat: stat.String(), Diff: diff.String(), DiffBytes: diff.Len()}),
		phase(event.CheckpointCommitCreated, event.CheckpointCommitCreatedData{Commit: commit}),
		phase(event.RuntimeTerminated, struct{}{}),
		phase(event.AttemptReported, &event.Report{
			Success: true, DurationMS: 48213, StdoutTail: g.stdout,
			FilesCreated: []string{"hello.txt"}, FilesModified: files, DiffSummary: stat.String(),
			Branch: branch, Commit: commit, Worktree: wt,
			Usage: &event.Usage{Model: "claude-opus-4-8", InputTokens: new(int64(38432)), OutputTokens: new(int64(24)),
				CacheReadTokens: new(int64(12000)), CostUSD: new(0.0412)},
			FinalText: "Done: created hello.txt containing hi.", ToolCalls: map[string]int{"Write": 1, "Edit": 3},
			EventsObject: id + "/e1/events.jsonl", LogObject: id + "/e1/output.log", LogBytes: int64(len(g.stdout)),
			PatchObject: id + "/e1/diff.patch",
		}),
	}
}

// BenchmarkStandbyLag measures how far a standby's fold falls behind the
// log under the fold benchmark's load: the same flows of 200 tasks
// (DROVER_BENCH_FOLD_EVENTS events, 150,000 by default) published as fast
// as JetStream takes them, while a controller's fold loop — what a
// standby runs — folds them live into an empty store. Every 20 ms the
// benchmark samples the lag: the stream's last sequence minus the
// sequence the fold has applied. Reported: the publish rate the fold kept
// up with (publish_events/s), the lag's median and maximum in events
// (lag_p50_events, lag_max_events), and catchup_ms, from the last
// publish's acknowledgement to the fold having applied it: how far behind
// a standby would take over if the leader died then.
func BenchmarkStandbyLag(b *testing.B) {
	n := benchEnvInt(b, "DROVER_BENCH_FOLD_EVENTS", 150_000)
	b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
		var lags []uint64
		var catchup, publish time.Duration
		var events int
		for range b.N {
			l, c, p, e := standbyLag(b, n)
			lags, catchup, publish, events = append(lags, l...), catchup+c, publish+p, events+e
		}
		slices.Sort(lags)
		b.ReportMetric(float64(events)/publish.Seconds(), "publish_events/s")
		b.ReportMetric(float64(lags[len(lags)/2]), "lag_p50_events")
		b.ReportMetric(float64(lags[len(lags)-1]), "lag_max_events")
		b.ReportMetric(float64(catchup.Milliseconds())/float64(b.N), "catchup_ms")
	})
}

// standbyLag runs one measurement: the lag samples, the catch-up after the
// last publish, how long publishing took and how many events it was.
func standbyLag(b *testing.B, n int) (lags []uint64, catchup, publish time.Duration, events int) {
	js, cfg := benchNATS(b)
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
	sampled := make(chan []uint64)
	stop := make(chan struct{})
	go func() { sampled <- sampleLag(js, st, stop) }()
	began := time.Now()
	last, _ := prefillEvents(b, js, cfg, n)
	published := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer wcancel()
	if err := c.waitApplied(wctx, last); err != nil {
		b.Fatalf("the standby did not catch up: %v (applied %d of %d)", err, st.Applied(), last)
	}
	caughtUp := time.Now()
	close(stop)
	lags = <-sampled
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return lags, caughtUp.Sub(published), published.Sub(began), int(last)
}

// sampleLag samples the stream's last sequence minus the store's applied
// one every 20 ms until stop closes.
func sampleLag(js jetstream.JetStream, st *store.Store, stop <-chan struct{}) []uint64 {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	lags := []uint64{0}
	for {
		select {
		case <-stop:
			return lags
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := js.Stream(ctx, queue.EventsStream)
		cancel()
		if err != nil {
			continue
		}
		if last, applied := s.CachedInfo().State.LastSeq, st.Applied(); last > applied {
			lags = append(lags, last-applied)
		} else {
			lags = append(lags, 0)
		}
	}
}
