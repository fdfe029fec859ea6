package leadership

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Elector campaigns for the lease and runs the leader's work for each term
// it wins.
type Elector struct {
	lease *Lease
	log   *slog.Logger
	// Observe, if set, is told of every renewal: how long it took and
	// whether it failed (metrics).
	Observe func(took time.Duration, err error)
}

// NewElector campaigns with lease.
func NewElector(lease *Lease, log *slog.Logger) *Elector {
	return &Elector{lease: lease, log: log}
}

// campaignEvery is how often a controller that does not lead tries to: a
// quarter of the TTL. It also campaigns at once when the lease is deleted
// or lapses, as the bucket's watch shows; the timer does not depend on
// the watch (servers before 2.11 showed no lapse to watchers).
func (e *Elector) campaignEvery() time.Duration { return max(e.lease.ttl/4, 50*time.Millisecond) }

// renewEvery is how often a leader renews: a third of the TTL, so that two
// renewals fit before the deadline.
func (e *Elector) renewEvery() time.Duration { return e.lease.ttl / 3 }

// Run campaigns until ctx ends. Each term it wins it hands to lead, which
// runs in Run's goroutine with a context that ends with the term (a renewal
// failed, the deadline passed); Run renews the term meanwhile. When lead
// returns while the term lasts (it stepped down), or ctx ends, Run
// resigns, so that another controller takes over at once. Run returns when
// ctx ends, after the term's work and renewals have stopped.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, t *Term)) {
	changed, stop := e.watch(ctx)
	defer stop()
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false // a campaign failed and was logged; until one gets an answer, say no more
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
		term, err := e.lease.Campaign(ctx)
		switch {
		case err == nil:
			failing = false
			e.serve(ctx, term, lead)
		case errors.Is(err, ErrHeld) || ctx.Err() != nil:
			failing = false
		case !failing:
			failing = true
			e.log.Warn("campaign for the leader lease failed; trying again every quarter TTL", "err", err)
		default:
			e.log.Debug("campaign for the leader lease", "err", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(e.campaignEvery())
	}
}

// serve runs one term: lead, with renewals beside it, then the
// resignation unless the term was lost.
func (e *Elector) serve(ctx context.Context, term *Term, lead func(context.Context, *Term)) {
	e.log.Info("won the leader lease", "controller", e.lease.id, "deadline_in", time.Until(term.Deadline()).Round(time.Millisecond))
	tctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.renew(tctx, term)
		cancel(term.Err())
	}()
	lead(tctx, term)
	cancel(context.Canceled)
	wg.Wait()
	why := term.Err()
	if why == nil || ctx.Err() != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer rcancel()
		if err := term.Resign(rctx); err != nil {
			e.log.Warn("resign the leader lease", "err", err)
		}
		if why == nil {
			why = ErrResigned
		}
	}
	e.log.Info("term ended", "controller", e.lease.id, "why", why)
}

// renew keeps the term until ctx ends or the term does: a renewal every
// renewEvery, and the term ended the moment its deadline passes even when
// a renewal is still on its way.
func (e *Elector) renew(ctx context.Context, term *Term) {
	every := time.NewTicker(e.renewEvery())
	defer every.Stop()
	for {
		deadline := time.NewTimer(time.Until(term.Deadline()))
		select {
		case <-ctx.Done():
			deadline.Stop()
			return
		case <-term.Done():
			deadline.Stop()
			return
		case <-deadline.C:
			term.Valid() // ends it if the deadline has passed
			continue
		case <-every.C:
		}
		deadline.Stop()
		began := time.Now()
		err := term.Renew(ctx)
		if e.Observe != nil && ctx.Err() == nil {
			e.Observe(time.Since(began), err)
		}
		if err != nil {
			e.log.Warn("leader lease renewal failed: stepping down", "err", err)
			return
		}
	}
}

// watch tells of every change of the lease key after the first: a
// resignation or a lapse is a reason to campaign at once. A watch that
// fails is not retried: the campaign timer goes on without it.
func (e *Elector) watch(ctx context.Context) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	w, err := e.lease.kv.Watch(ctx, Key, jetstream.UpdatesOnly())
	if err != nil {
		e.log.Debug("watch the leader lease", "err", err)
		return out, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ent := range w.Updates() {
			if ent != nil && ent.Operation() != jetstream.KeyValuePut {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, func() {
		_ = w.Stop()
		<-done
	}
}
