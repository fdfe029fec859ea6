package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/leadertest"
	"github.com/drover-dev/drover/internal/queue"
)

// group is several controllers on one external nats-server, each with a
// data dir (and so an id) of its own: the HA setup.
type group struct {
	t       *testing.T
	members []*cluster
	ids     []string
	nc      *nats.Conn
	js      jetstream.JetStream
}

// startGroup starts n controllers on url.
func startGroup(t *testing.T, url string, n int, env ...string) *group {
	t.Helper()
	g := &group{t: t}
	for range n {
		c := startControllerOn(t, url, env...)
		g.members = append(g.members, c)
		g.ids = append(g.ids, controllerIDOf(t, c))
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	g.nc = nc
	g.js, _ = jetstream.New(nc)
	return g
}

// controllerIDOf reads the id a controller made itself in its data dir.
func controllerIDOf(t *testing.T, c *cluster) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dataDir, "controller-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// holder is the lease's holder now ("" when none).
func (g *group) holder() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := leadership.Holder(ctx, g.js)
	if err != nil {
		return ""
	}
	return h
}

// leader waits for a controller of the group other than except to hold
// the lease, and returns its index.
func (g *group) leader(except string) int {
	g.t.Helper()
	i := -1
	waitFor(g.t, 60*time.Second, "a leader", func() bool {
		h := g.holder()
		for k, id := range g.ids {
			if id == h && id != except {
				i = k
				return true
			}
		}
		return false
	})
	return i
}

// lastElection is the stream sequence and epoch of the last election.
func (g *group) lastElection() (seq, epoch uint64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seq, epoch, err := leadertest.LastElection(ctx, g.js)
	if err != nil {
		g.t.Fatal(err)
	}
	return seq, epoch
}

// streamLast is the events stream's last sequence.
func (g *group) streamLast() uint64 {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := leadertest.StreamLast(ctx, g.js)
	if err != nil {
		g.t.Fatal(err)
	}
	return last
}

// handover reads the log after seq, from the leader of epoch before that
// stopped at t0, to the first decision of the leader after it.
func (g *group) handover(seq, before uint64, t0 time.Time) leadertest.Handover {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := leadertest.Measure(ctx, g.js, seq, before, t0, time.Minute)
	if err != nil {
		g.t.Fatal(err)
	}
	return h
}

// killLeader kills the leader with SIGKILL, waits for another controller
// to take over and decide, then starts the killed one again (a standby
// now: started earlier, it would take its own lease back at once).
func (g *group) killLeader() leadertest.Handover {
	g.t.Helper()
	i := g.leader("")
	seq, epoch := g.lastElection()
	c := g.members[i]
	t0 := time.Now()
	_ = syscall.Kill(-c.ctrl.cmd.Process.Pid, syscall.SIGKILL)
	<-c.ctrl.done
	// Nothing the new leader writes comes before the stream's end now: it
	// waits for the lease to lapse.
	h := g.handover(max(seq, g.streamLast()), epoch, t0)
	c.startCtrl("")
	return h
}

// rebuildEveryone checks that every controller's projection equals a fold
// of the log into an empty store.
func (g *group) rebuildEveryone() {
	g.t.Helper()
	for i, c := range g.members {
		out, errOut, code := c.cli("rebuild", "--controller", g.ids[i])
		if code != 0 || !strings.Contains(out, "equals the live projection") {
			g.t.Errorf("rebuild on %s: exit %d\n%s\n%s", g.ids[i], code, out, errOut)
		}
	}
}

// summarize is p50 and max of what the handovers took to decide.
func summarize(hs []leadertest.Handover) (p50, most time.Duration) {
	var ds []time.Duration
	for _, h := range hs {
		ds = append(ds, h.Decided)
	}
	return leadertest.Percentiles(ds)
}

// scanLeadership reads the whole log and counts the decisions that landed
// after an election newer than their leader's epoch (which the fold must
// ignore), and returns the elections in order.
func (g *group) scanLeadership() (stale int, elections []*event.Event) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	last := g.streamLast()
	cons, err := g.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		g.t.Fatal(err)
	}
	var latest uint64
	for seq := uint64(0); seq < last; {
		msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			g.t.Fatalf("read the log: %v", err)
		}
		md, _ := msg.Metadata()
		seq = md.Sequence.Stream
		ev, err := event.Decode(msg.Data())
		switch {
		case err != nil || ev.LeaderEpoch == 0:
		case ev.Type == event.LeaderElected:
			latest = max(latest, ev.LeaderEpoch)
			elections = append(elections, ev)
		case ev.LeaderEpoch < latest:
			stale++
		}
	}
	return stale, elections
}

// TestSplitBrain stops the leader (SIGSTOP) in the middle of a flow, until
// a standby has taken over and decided, then lets it run again (SIGCONT):
// it finds its term over and becomes a standby. Whatever is published in
// its epoch after the new election takes no effect: what it published
// late itself, if anything, and what the test publishes as it would (a
// cancel of the whole flow, a job of an attempt nobody scheduled). The
// fold ignores every such decision (the count in the log is the count the
// fold fenced), the worker refuses the job, no attempt runs twice, every
// task ends once, and both projections equal a rebuild.
func TestSplitBrain(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	g := startGroup(t, ns.url(), 2, "DROVER_CONTROLLER_LEASE_TTL=2s")
	c := g.members[0]
	w := c.startWorker("w1", 3)
	repo := newRepo(t)
	var b strings.Builder
	fmt.Fprintf(&b, "name: split\nrepo: %s\nruntime: demo\nmax_parallel: 3\ntasks:\n", repo)
	for i := range 40 {
		fmt.Fprintf(&b, "  - id: t%03d\n    prompt: |\n      @sleep 200ms\n      @write out/t%03d.txt x\n", i, i)
	}
	old := g.leader("")
	oldID := g.ids[old]
	id := c.submit(b.String())
	waitFor(t, time.Minute, "the flow to run", func() bool { return countEvents(g.js, id, event.AttemptReported) > 2 })
	p := g.members[old].ctrl
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	seq, epoch := g.lastElection()
	h := g.handover(max(seq, g.streamLast()), epoch, time.Now())
	t.Logf("the leader %s stopped; %s", oldID, h)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.waitLog(time.Minute, "term ended")
	waitFor(t, time.Minute, oldID+" to say it stands by", func() bool {
		out, _, code := c.cli("controllers", "-o", "json")
		return code == 0 && roleOf(out, oldID) == "standby" && roleOf(out, h.Leader) == "leader"
	})
	// With at most 3 attempts at once, 4 more claimed include one the new
	// leader scheduled: the worker has had a job of its epoch.
	claimed := countEvents(g.js, id, event.AttemptClaimed)
	waitFor(t, 2*time.Minute, "the worker to run the new leader's jobs", func() bool {
		return countEvents(g.js, id, event.AttemptClaimed) >= claimed+4
	})
	lateDecisions(t, g, w, id, epoch)

	st := c.waitFlow(id, 4*time.Minute, "succeeded")
	for _, task := range st.Detail.Tasks {
		if task.State != "succeeded" || task.Attempts != 1 {
			t.Errorf("task %s: %s after %d attempts", task.ID, task.State, task.Attempts)
		}
	}
	checkRunOnce(t, c.events(id))
	stale, elections := g.scanLeadership()
	if st.Leadership == nil || st.Leadership.Fenced != stale || stale == 0 || len(elections) < 2 {
		t.Errorf("the log has %d decisions of an old leader after a newer election, the fold fenced %+v; %d elections", stale, st.Leadership, len(elections))
	}
	t.Logf("decisions of epoch %d after the election of epoch %d: %d, all ignored by the fold", epoch, h.Epoch, stale)
	g.rebuildEveryone()
}

// lateDecisions publishes what the old leader of epoch could still send
// after the new one's election: a cancel of the whole flow, and a job of
// an attempt nobody scheduled. Neither may take effect.
func lateDecisions(t *testing.T, g *group, w *proc, flowID string, epoch uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := event.New("cancel_requested:late", event.CancelRequested, time.Now(), flowID, "", "", 0,
		event.CancelRequestedData{Scope: event.CancelFlow, Reason: "from a leader whose term ended"})
	if err != nil {
		t.Fatal(err)
	}
	ev.LeaderEpoch = epoch
	if _, err := queue.PublishEvent(ctx, g.js, ev); err != nil {
		t.Fatal(err)
	}
	att := drovertype.AttemptID(flowID, "t000", 9)
	b := queue.NewLeaderBatch(g.js, epoch)
	b.Job(ctx, &queue.Job{Attempt: att, Flow: flowID, Task: "t000", N: 9, Pool: "default", Runtime: "demo",
		Repo: "/nonexistent.git", Base: "main", Branch: drovertype.AttemptBranch(flowID, "t000", 9), Prompt: "@write late.txt x"}, nil)
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitLog(time.Minute, "job of an earlier leader refused")
	if !w.logged(att) {
		t.Errorf("the worker refused a job, not %s", att)
	}
	kv, err := g.js.KeyValue(ctx, queue.ClaimsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, att); err == nil {
		t.Errorf("the old leader's job %s was claimed", att)
	}
}

// roleOf is a controller's role in `controller controllers -o json`.
func roleOf(out, id string) string {
	i := strings.Index(out, `"id":"`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := out[i:]
	j := strings.Index(rest, `"role":"`)
	if j < 0 {
		return ""
	}
	role, _, _ := strings.Cut(rest[j+len(`"role":"`):], `"`)
	return role
}

// TestRollingRestart stops the controllers one by one (SIGTERM, as a
// rolling update does) and starts each again before the next, during a
// flow. The lease's TTL is a minute: a leader that stops resigns, and the
// next takes over at once; were it to wait for the lease to lapse, the
// flow would stand still for a minute. So no pause between two decisions
// may reach half of it; the handovers' times are reported.
func TestRollingRestart(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	ns := startNATS(t)
	g := startGroup(t, ns.url(), 3, "DROVER_CONTROLLER_LEASE_TTL=1m")
	c := g.members[0]
	c.startWorker("w1", 3)
	c.startWorker("w2", 3)
	repo := newRepo(t)
	var b strings.Builder
	fmt.Fprintf(&b, "name: rolling\nrepo: %s\nruntime: demo\nmax_parallel: 4\ntasks:\n", repo)
	for i := range 60 {
		fmt.Fprintf(&b, "  - id: t%03d\n    prompt: |\n      @sleep 400ms\n      @write out/t%03d.txt x\n", i, i)
	}
	id := c.submit(b.String())
	waitFor(t, time.Minute, "the flow to run", func() bool { return countEvents(g.js, id, event.AttemptReported) > 3 })
	var handovers []leadertest.Handover
	for i, m := range g.members {
		leading := g.holder() == g.ids[i]
		seq, epoch := g.lastElection()
		from := max(seq, g.streamLast())
		t0 := time.Now()
		m.ctrl.stop()
		if leading {
			h := g.handover(from, epoch, t0)
			t.Logf("the leader %s stopped; %s", g.ids[i], h)
			handovers = append(handovers, h)
		}
		m.startCtrl("")
		g.waitCaughtUp(i)
	}
	if len(handovers) == 0 {
		t.Fatal("no leader was stopped")
	}
	st := c.waitFlow(id, 4*time.Minute, "succeeded")
	for _, task := range st.Detail.Tasks {
		if task.State != "succeeded" {
			t.Errorf("task %s: %s", task.ID, task.State)
		}
	}
	gap := g.longestPause(id)
	t.Logf("%d handovers; the longest pause between two decisions of the flow: %s", len(handovers), gap.Round(time.Millisecond))
	for _, h := range handovers {
		if h.Elected >= ttl/2 || h.Decided >= ttl/2 {
			t.Errorf("a handover: %s: the lease lapsed rather than being handed over", h)
		}
	}
	if gap >= ttl/2 {
		t.Errorf("the flow stood still for %s", gap)
	}
	g.rebuildEveryone()
}

// longestPause is the longest time between two decisions about the flow
// (events a leader stamped), by the stream's clock.
func (g *group) longestPause(flowID string) time.Duration {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := g.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.FlowEventsFilter(flowID)},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	var prev time.Time
	var longest time.Duration
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return longest
		}
		md, _ := msg.Metadata()
		ev, err := event.Decode(msg.Data())
		if err != nil || ev.LeaderEpoch == 0 {
			continue
		}
		if !prev.IsZero() {
			longest = max(longest, md.Timestamp.Sub(prev))
		}
		prev = md.Timestamp
		if ev.Type == event.FlowCompleted {
			return longest
		}
	}
}

// waitCaughtUp waits until controller i has folded the log as far as it
// went when asked.
func (g *group) waitCaughtUp(i int) {
	g.t.Helper()
	last := g.streamLast()
	waitFor(g.t, time.Minute, g.ids[i]+" to catch up", func() bool {
		out, _, code := g.members[i].cli("status", "--controller", g.ids[i], "-o", "json")
		var st struct {
			Applied uint64 `json:"applied_seq"`
		}
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Applied >= last
	})
}
