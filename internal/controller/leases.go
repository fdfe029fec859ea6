package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/queue"
)

// leaseMonitor finds attempts whose worker died: a claim that nobody renews
// for a whole lease (queue.ack_wait) is revoked and the attempt recorded as
// lost (attempt_lost, class WORKER_LOST); the decision function then retries
// the task by its policy, as a new attempt on any worker.
//
// Silence is measured on this process's clock, from when it last saw the
// claim change, never by comparing its clock with a timestamp written by
// another host: clock skew cannot shorten a lease. The price is that after a
// controller restart, or a reconnect to NATS (renewals made meanwhile may
// arrive late), every claim gets a full lease again before it can lapse.
// The revocation is a compare-and-set on the revision last seen, so a
// renewal that races it wins and nothing is lost that was alive.
type leaseMonitor struct {
	c     *Controller
	lease time.Duration
	// seen is every running or lost claim, with when it last changed.
	seen       map[string]*seenClaim
	reconnects uint64
}

type seenClaim struct {
	info queue.ClaimInfo
	at   time.Time
}

func newLeaseMonitor(c *Controller) *leaseMonitor {
	return &leaseMonitor{c: c, lease: c.cfg.Queue.AckWait, seen: map[string]*seenClaim{}}
}

// run watches the claims until ctx ends. A watch that fails is started
// again; the claims it missed come back with the new watch's first values.
func (m *leaseMonitor) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		w, err := m.c.claims.Watch(ctx)
		if err != nil {
			m.c.log.Warn("watch claims", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		m.watch(ctx, w)
		_ = w.Stop()
	}
}

func (m *leaseMonitor) watch(ctx context.Context, w *queue.ClaimWatcher) {
	// A check every quarter lease finds a silent claim at most a quarter
	// lease late.
	t := time.NewTicker(max(m.lease/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case info, ok := <-w.Updates():
			if !ok {
				return
			}
			if info != nil {
				m.update(info)
			}
		case <-t.C:
			m.check(ctx)
		}
	}
}

func (m *leaseMonitor) update(info *queue.ClaimInfo) {
	if !info.Running() && !info.Lost() {
		delete(m.seen, info.Attempt)
		return
	}
	m.seen[info.Attempt] = &seenClaim{info: *info, at: m.c.now()}
}

// check revokes the claims that lapsed and records their attempts as lost.
func (m *leaseMonitor) check(ctx context.Context) {
	nc := m.c.js.Conn()
	if !nc.IsConnected() {
		return // nobody can renew now; judge no one
	}
	now := m.c.now()
	if r := nc.Stats().Reconnects; r != m.reconnects {
		m.reconnects = r
		for _, s := range m.seen {
			s.at = now
		}
		return
	}
	for id, s := range m.seen {
		if strings.Contains(id, "__integrate_") {
			// Integration builds are taken over by the next delivery
			// (AcquireOrTakeOver); there is no attempt to fail.
			delete(m.seen, id)
			continue
		}
		if !s.info.Lost() && now.Sub(s.at) < m.lease {
			continue
		}
		var a *projection.Attempt
		m.c.store.Read(func(st *projection.State) {
			if at := st.Attempts[id]; at != nil {
				cp := *at
				a = &cp
			}
		})
		switch {
		case a == nil:
			continue // not folded yet (or not ours): look again next time
		case a.State.Terminal():
			// Reported before its worker went silent, or already lost.
			delete(m.seen, id)
			continue
		}
		if err := m.lost(ctx, a, s); err != nil {
			m.c.log.Warn("lost attempt", "attempt", id, "err", err)
		}
	}
}

// lost revokes a lapsed claim and records the loss. The event id names the
// claim, so recording it again (the next check, or after a restart) counts
// once.
func (m *leaseMonitor) lost(ctx context.Context, a *projection.Attempt, s *seenClaim) error {
	if _, err := m.c.leading(); err != nil {
		return err // only the leader reaps
	}
	info, err := m.c.claims.RevokeLapsed(ctx, a.ID, s.info.Revision)
	if errors.Is(err, queue.ErrHeld) {
		// Renewed, finished or taken over meanwhile: the watch brings the
		// new state; until it does, give the claim a fresh lease.
		s.at = m.c.now()
		return nil
	}
	if err != nil {
		return err
	}
	if !s.info.Lost() {
		m.c.log.Warn("worker lost: its claim lapsed", "attempt", a.ID, "worker", info.Worker, "epoch", info.Epoch, "lease", m.lease)
	}
	s.info = *info
	ev, err := event.New(drovertype.ClaimEventID(event.AttemptLost, a.ID, info.Epoch), event.AttemptLost, m.c.now(),
		a.Flow, a.Task, a.ID, info.Epoch, event.AttemptLostData{
			Worker: info.Worker, LeaseMS: m.lease.Milliseconds(),
			Reason: fmt.Sprintf("no renewal of the claim for %s", m.lease),
		})
	if err != nil {
		return err
	}
	// Made from the attempt as the projection held it, at most this far.
	_, err = m.c.publishDecision(ctx, ev, m.c.store.Applied())
	return err
}
