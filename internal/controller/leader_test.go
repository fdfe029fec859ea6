package controller

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/queue"
)

// peer is another controller on h's NATS, with a store and an id of its own.
func (h *harness) peer(id string) *harness {
	cfg := *h.cfg
	cfg.Controller.ID = id
	p := &harness{t: h.t, cfg: &cfg, nc: h.nc, js: h.js, leaseJS: h.leaseJS}
	p.start(filepath.Join(h.t.TempDir(), id))
	return p
}

// gatedPeer is another controller on h's NATS, not started yet, whose fold
// reads nothing until open is closed: a controller behind the log.
func (h *harness) gatedPeer(id string, open <-chan struct{}) *harness {
	cfg := *h.cfg
	cfg.Controller.ID = id
	p := &harness{t: h.t, cfg: &cfg, nc: h.nc, js: h.js, leaseJS: h.leaseJS}
	p.setup = func(c *Controller) {
		c.events = func(ctx context.Context, seq uint64) (jetstream.MessagesContext, error) {
			it, err := c.orderedEvents(ctx, seq)
			if err != nil {
				return nil, err
			}
			return &gatedEvents{MessagesContext: it, open: open}, nil
		}
	}
	return p
}

// leads reports whether h's controller leads now.
func (h *harness) leads() bool {
	_, err := h.ctrl.leading()
	return err == nil
}

// TestStandbyFollowsAndTakesOver: two controllers fold one log; one leads.
// The standby answers reads from its own projection and forwards writes to
// the leader; when the leader stops, it resigns and the standby takes over
// at once (the lease's TTL is a minute: only the resignation explains it),
// in a new epoch, and the flow goes on under it.
func TestStandbyFollowsAndTakesOver(t *testing.T) {
	h := newHarness(t)
	h.cfg.Controller.ID = "ctl-a"
	h.cfg.Controller.LeaseTTL = time.Minute
	// The leader answers only its own subjects: a write reaches it through
	// the standby, forwarded.
	h.noAPI = true
	h.start(filepath.Join(t.TempDir(), "a"))
	waitCond(t, "ctl-a to lead", h.leads)
	b := h.peer("ctl-b")

	id, att := h.submitOne()
	h.waitFor("a's attempt", func(st *projection.State) bool { return st.Attempts[att] != nil })
	b.waitFor("the standby to fold the attempt", func(st *projection.State) bool { return st.Attempts[att] != nil })
	if b.leads() {
		t.Fatal("both controllers lead")
	}
	// Both are in the registry, by role, with the epoch and how far each
	// has folded (renewed every registryEvery).
	var regs []*fleet.Controller
	waitCond(t, "the registry to show a leader and a standby in epoch 1", func() bool {
		var err error
		if regs, err = fleet.Controllers(context.Background(), h.js); err != nil {
			t.Fatal(err)
		}
		return len(regs) == 2 && regs[0].ID == "ctl-a" && regs[0].Role == fleet.RoleLeader && regs[0].Epoch == 1 &&
			regs[1].ID == "ctl-b" && regs[1].Role == fleet.RoleStandby && regs[1].Epoch == 1 && regs[1].Applied > 1
	})

	// The leader stops: the standby leads in epoch 2 and decides.
	h.stop()
	waitCond(t, "ctl-b to lead after ctl-a resigned", b.leads)
	var l projection.Leadership
	b.store.Read(func(st *projection.State) { l = *st.Leadership })
	if l.Epoch != 2 || l.Controller != "ctl-b" {
		t.Fatalf("leadership after the handover: %+v", l)
	}
	b.publish(event.AttemptClaimed, id, "a", att, 1, event.AttemptClaimedData{Worker: "w1"})
	b.publish(event.AttemptReported, id, "a", att, 1, event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc"})
	b.waitFor("the new leader to schedule the integration", func(st *projection.State) bool { return st.Flows[id].Integration != nil })
	msg, err := lastEventOf(b, id, event.IntegrationScheduled)
	if err != nil {
		t.Fatal(err)
	}
	if msg.LeaderEpoch != 2 {
		t.Errorf("the new leader's decision carries epoch %d, want 2", msg.LeaderEpoch)
	}
	res, err := b.ctrl.Rebuild(context.Background())
	if err != nil || !res.Equal {
		t.Fatalf("rebuild on the new leader: %v %v", err, res.Diffs)
	}
}

// lastEventOf reads the last event of a type of a flow off the stream.
func lastEventOf(h *harness, flowID string, typ event.Type) (*event.Event, error) {
	s, err := h.js.Stream(context.Background(), queue.EventsStream)
	if err != nil {
		return nil, err
	}
	m, err := s.GetLastMsgForSubject(context.Background(), queue.EventSubject(flowID, string(typ)))
	if err != nil {
		return nil, err
	}
	return event.Decode(m.Data)
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatedEvents holds the fold's every read until open is closed: a standby
// whose fold lags the leader.
type gatedEvents struct {
	jetstream.MessagesContext
	open <-chan struct{}
}

func (g *gatedEvents) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	<-g.open
	return g.MessagesContext.Next(opts...)
}

// TestControllerFoldsBeforeCampaigning: a controller that starts behind the
// log (a new one, or one that lost its store) folds it before it campaigns:
// it neither holds the lease nor records an election while its fold is
// held back, and leads, in the next epoch, once it has caught up.
func TestControllerFoldsBeforeCampaigning(t *testing.T) {
	h := newHarness(t)
	h.cfg.Controller.ID = "ctl-a"
	h.cfg.Controller.LeaseTTL = 2 * time.Second
	h.start(filepath.Join(t.TempDir(), "a"))
	waitCond(t, "ctl-a to lead", h.leads)
	h.submitOne()
	h.stop() // resigns: the lease is free
	open := make(chan struct{})
	release := sync.OnceFunc(func() { close(open) })
	b := h.gatedPeer("ctl-b", open)
	ctx := context.Background()
	s, err := h.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	last := s.CachedInfo().State.LastSeq
	b.start(filepath.Join(t.TempDir(), "b"))
	t.Cleanup(release) // runs before b's stop: a failed test's controller stops
	// Longer than the lease's campaigns (every TTL/4) and deadline.
	for range 30 {
		time.Sleep(100 * time.Millisecond)
		if holder, err := leadership.Holder(ctx, h.js); err == nil && holder != "" {
			t.Fatalf("the lease is held by %q while ctl-b's fold is held back", holder)
		}
	}
	if info, err := s.Info(ctx); err != nil || info.State.LastSeq != last {
		t.Fatalf("the log grew while ctl-b's fold was held back (%v)", err)
	}
	release()
	waitCond(t, "ctl-b to lead once caught up", b.leads)
	var l projection.Leadership
	b.store.Read(func(st *projection.State) { l = *st.Leadership })
	if l.Epoch != 2 || l.Controller != "ctl-b" {
		t.Errorf("leadership after ctl-b caught up: %+v, want epoch 2", l)
	}
}

// TestStandbyReadsTheLeadersWrites: a flow submitted through the leader is
// found by a standby whose fold lags behind (held back here): before it
// answers that a flow does not exist, a controller folds up to where the
// log was when asked.
func TestStandbyReadsTheLeadersWrites(t *testing.T) {
	h := newHarness(t)
	h.cfg.Controller.ID = "ctl-a"
	h.start(filepath.Join(t.TempDir(), "a"))
	waitCond(t, "ctl-a to lead", h.leads)
	open := make(chan struct{})
	b := h.gatedPeer("ctl-b", open)
	b.noAPI = true
	b.start(filepath.Join(t.TempDir(), "b"))
	svc, err := b.ctrl.ServeAPI(context.Background(), h.nc, func(n string) bool { return n == "demo" })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	id, _ := h.submitOne()
	time.AfterFunc(200*time.Millisecond, func() { close(open) })
	st, err := (&Client{NC: h.nc, Controller: "ctl-b"}).Status(context.Background(), id)
	if err != nil {
		t.Fatalf("the standby's status of a flow the leader recorded: %v", err)
	}
	if st.Controller != "ctl-b" || st.Detail == nil || st.Detail.Flow.ID != id {
		t.Errorf("status answered by %q: %+v", st.Controller, st.Detail)
	}
}

// TestEveryPublishIsTheLeaders: the controller publishes events only as the
// leader, through publish (one event) or a leader's batch (a round), which
// stamp the term's epoch and refuse when it does not lead; its cancel
// signals carry the epoch too. An event published around them would carry
// no epoch, and the fold would ignore it once an election is in the log:
// a decision silently lost. This reads the package's source for such a
// call, so that a new path (a merge, a new runner) cannot forget.
func TestEveryPublishIsTheLeaders(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"leader.go": true} // publish itself, and the election
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || allowed[f] {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, call := range []string{"queue.PublishEvent(", "queue.NewBatch(", "queue.PublishJob(", ".Publish(", ".PublishMsg("} {
				if strings.Contains(line, call) {
					t.Errorf("%s:%d: %s outside the leader's publish (c.publish, queue.NewLeaderBatch): %s", f, i+1, call, strings.TrimSpace(line))
				}
			}
			if strings.Contains(line, "queue.SignalCancel(") && !strings.Contains(line, "lt.epoch") {
				t.Errorf("%s:%d: a cancel signal without the leader's epoch: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
