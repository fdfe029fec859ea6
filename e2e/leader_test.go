package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/leadership"
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
	s, err := g.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		g.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, event.Subject(event.LeadershipFlow, event.LeaderElected))
	if err != nil {
		return 0, 0
	}
	ev, err := event.Decode(m.Data)
	if err != nil {
		g.t.Fatal(err)
	}
	return m.Sequence, ev.LeaderEpoch
}

// streamLast is the events stream's last sequence.
func (g *group) streamLast() uint64 {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := g.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		g.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	return info.State.LastSeq
}

// handover is what a failover took, from when the old leader stopped:
// the new leader's election in the log, and its first decision (an event
// it stamped with its epoch, its election aside).
type handover struct {
	leader           string
	epoch            uint64
	elected, decided time.Duration
}

func (h handover) String() string {
	return fmt.Sprintf("%s leads epoch %d: elected after %s, first decision after %s", h.leader, h.epoch,
		h.elected.Round(time.Millisecond), h.decided.Round(time.Millisecond))
}

// handover reads the log after seq, from the leader of epoch before that
// stopped at t0, to the first decision of the leader after it.
func (g *group) handover(seq, before uint64, t0 time.Time) handover {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := g.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq + 1,
	})
	if err != nil {
		g.t.Fatal(err)
	}
	var h handover
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			g.t.Fatalf("no decision of a new leader after the leader of epoch %d stopped: %v (%v)", before, err, h)
		}
		md, err := msg.Metadata()
		if err != nil {
			g.t.Fatal(err)
		}
		ev, err := event.Decode(msg.Data())
		switch {
		case err != nil || ev.LeaderEpoch <= before:
		case ev.Type == event.LeaderElected:
			var d event.LeaderElectedData
			_ = ev.Payload(&d)
			h.leader, h.epoch, h.elected = d.Controller, ev.LeaderEpoch, md.Timestamp.Sub(t0)
		case ev.LeaderEpoch == h.epoch:
			h.decided = md.Timestamp.Sub(t0)
			return h
		}
	}
}

// killLeader kills the leader with SIGKILL, waits for another controller
// to take over and decide, then starts the killed one again (a standby
// now: started earlier, it would take its own lease back at once).
func (g *group) killLeader() handover {
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
func summarize(hs []handover) (p50, most time.Duration) {
	var ds []time.Duration
	for _, h := range hs {
		ds = append(ds, h.decided)
	}
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)-1]
}
