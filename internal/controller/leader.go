package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/tracing"
)

// Every controller folds the log; one, the leader, decides. A controller
// campaigns for the lease (package leadership) and, each time it wins,
// opens a term in the log: it appends leader_elected at the next epoch, on
// condition that the leadership subject still ends where it read it, and
// folds up to it. Only then does it act — decide, publish jobs and cancel
// signals, reap lapsed claims, record operator requests — and everything
// it publishes carries the term's epoch, which the fold and the workers
// fence by. It stops the moment the term ends: a renewal failed, its
// deadline passed, or the log shows a newer election.

// ErrNotLeader is returned by what only the leader may do, asked of a
// controller that does not lead now.
var ErrNotLeader = errors.New("controller: this controller does not lead now")

// errFenced means the leader's event was published but not folded: a newer
// election came before it, so it took no effect.
var errFenced = errors.New("controller: the request was recorded after this controller's term ended, so it took no effect")

// leaderTerm is a term this controller leads: the lease's term and the
// epoch it opened in the log.
type leaderTerm struct {
	term  *leadership.Term
	epoch uint64
}

// leading returns the term this controller leads now, or ErrNotLeader.
func (c *Controller) leading() (*leaderTerm, error) {
	lt := c.term.Load()
	if lt == nil || !lt.term.Valid() {
		return nil, ErrNotLeader
	}
	return lt, nil
}

// publish records ev as the leader's decision: stamped with its epoch,
// refused when this controller does not lead.
func (c *Controller) publish(ctx context.Context, ev *event.Event) (uint64, error) {
	lt, err := c.leading()
	if err != nil {
		return 0, err
	}
	ev.LeaderEpoch = lt.epoch
	return queue.PublishEvent(ctx, c.js, ev)
}

// publishDecision publishes ev, a decision made from the projection as
// folded up to folded, as publish does, through queue.PublishDecision: a
// message another writer stored under its id first does not stand in for
// it.
func (c *Controller) publishDecision(ctx context.Context, ev *event.Event, folded uint64) (uint64, error) {
	lt, err := c.leading()
	if err != nil {
		return 0, err
	}
	ev.LeaderEpoch = lt.epoch
	return queue.PublishDecision(ctx, c.js, ev, folded)
}

// lead is the work of one term the elector won: open it in the log, then
// decide, reap lapsed claims and answer the operator's writes until the
// term ends. Returning while the term lasts steps down (the elector
// resigns).
func (c *Controller) lead(ctx context.Context, term *leadership.Term) {
	began := time.Now()
	sctx, span := c.traceElection(ctx)
	epoch, err := c.openTerm(sctx, term)
	span(epoch, err)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("could not open a term in the log; stepping down", "err", err)
		}
		return
	}
	lt := &leaderTerm{term: term, epoch: epoch}
	c.term.Store(lt)
	c.changedRole()
	defer c.changedRole()
	defer c.term.Store(nil)
	c.m.leader.Store(1)
	defer c.m.leader.Store(0)
	c.log.Info("leading", "controller", c.id, "epoch", epoch, "took", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWrites, err := c.serveLeaderAPI(ctx)
	if err != nil {
		c.log.Warn("serve the leader's API; stepping down", "err", err)
		return
	}
	defer stopWrites()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.decideLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		// A new monitor for every term: every claim gets a whole lease
		// from when this leader first sees it, so the workers of a
		// failover keep their attempts (their renewals go on meanwhile).
		newLeaseMonitor(c).run(ctx)
	}()
	c.watchElections(ctx, lt)
	cancel()
	wg.Wait()
	c.log.Info("term ended", "controller", c.id, "epoch", epoch, "why", context.Cause(ctx))
}

// foldBeforeCampaign returns once the fold has applied the log as it stood
// when it was called: a controller campaigns only then. One that won the
// lease while folding a long log (a new controller, a lost store: 1.2
// million events take some 25 s) could not open its term before the
// lease's deadline, since it must fold its own election, and would win,
// give up and win again, warning each time. A standby that kept up
// campaigns at once.
func (c *Controller) foldBeforeCampaign(ctx context.Context) {
	last, err := c.streamLast(ctx)
	if err != nil || last <= c.store.Applied() {
		return // campaigning says what is wrong with NATS
	}
	began, applied := time.Now(), c.store.Applied()
	c.log.Info("folding the log before campaigning for the leadership", "applied_seq", applied, "last_seq", last)
	if err := c.waitApplied(ctx, last); err != nil {
		return
	}
	c.log.Info("caught up with the log", "events", last-applied, "took", time.Since(began).Round(time.Millisecond))
}

// watchElections returns when ctx ends or the fold shows an election newer
// than lt's: another controller leads (this one's lease lapsed unseen, or
// an election was forged), and this term is over.
func (c *Controller) watchElections(ctx context.Context, lt *leaderTerm) {
	folded, unsubscribe := c.Subscribe()
	defer unsubscribe()
	for {
		var latest uint64
		c.store.Read(func(st *projection.State) { latest = st.LeaderEpoch() })
		if latest != lt.epoch {
			c.log.Warn("the log shows a newer election: stepping down", "epoch", lt.epoch, "latest", latest)
			lt.term.End(fmt.Errorf("controller: the log elected epoch %d", latest))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-folded:
		}
	}
}

// openTermTries bounds the appends of one term's election that find the
// leadership subject moved on since it was read.
const openTermTries = 5

// openTerm appends this controller's election at the epoch after the latest
// folded, on condition that nothing was appended to the leadership subject
// since, and waits until the fold has applied it. It returns the epoch.
func (c *Controller) openTerm(ctx context.Context, term *leadership.Term) (uint64, error) {
	ctx, cancel := context.WithDeadline(ctx, term.Deadline())
	defer cancel()
	subject := event.Subject(event.LeadershipFlow, event.LeaderElected)
	for range openTermTries {
		last, err := c.lastSeqOn(ctx, subject)
		if err != nil {
			return 0, err
		}
		if err := c.waitApplied(ctx, last); err != nil {
			return 0, err
		}
		var epoch uint64
		c.store.Read(func(st *projection.State) { epoch = st.LeaderEpoch() + 1 })
		ev, err := event.New(drovertype.EventID(event.LeaderElected, strconv.FormatUint(epoch, 10)), event.LeaderElected,
			c.now(), event.LeadershipFlow, "", "", 0, event.LeaderElectedData{Controller: c.id})
		if err != nil {
			return 0, err
		}
		ev.LeaderEpoch = epoch
		if !term.Valid() {
			return 0, term.Err()
		}
		seq, err := queue.PublishEvent(ctx, c.js, ev, jetstream.WithExpectLastSequencePerSubject(last))
		if queue.IsConditionFailed(err) {
			continue // another election came first: fold it and see
		}
		if err != nil {
			return 0, err
		}
		if err := c.waitApplied(ctx, seq); err != nil {
			return 0, err
		}
		var l projection.Leadership
		c.store.Read(func(st *projection.State) {
			if st.Leadership != nil {
				l = *st.Leadership
			}
		})
		if l.Epoch != epoch || l.Seq != seq || l.Controller != c.id {
			return 0, fmt.Errorf("controller: the election of epoch %d at seq %d was not folded as such (the log is at epoch %d)", epoch, seq, l.Epoch)
		}
		return epoch, nil
	}
	return 0, fmt.Errorf("controller: the leadership subject moved on %d times while this controller was being elected", openTermTries)
}

// lastSeqOn is the stream sequence of the last message on subject, 0 when
// there is none.
func (c *Controller) lastSeqOn(ctx context.Context, subject string) (uint64, error) {
	s, err := c.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return 0, fmt.Errorf("controller: events stream: %w", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("controller: last election: %w", err)
	}
	return m.Sequence, nil
}

// traceElection starts the span of one of this controller's elections,
// from winning the lease to folding its leader_elected: the part of a
// failover that is the new leader's, and the parent of its leader_elected's
// publish. Each election is a trace of its own.
func (c *Controller) traceElection(ctx context.Context) (context.Context, func(epoch uint64, err error)) {
	if !tracing.Enabled() {
		return ctx, func(uint64, error) {}
	}
	ctx, span := tracing.Tracer().Start(ctx, "leader election", trace.WithNewRoot(),
		trace.WithAttributes(tracing.KeyController.String(c.id)))
	return ctx, func(epoch uint64, err error) {
		span.SetAttributes(tracing.KeyLeaderEpoch.Int64(int64(epoch)))
		tracing.End(span, err)
	}
}
