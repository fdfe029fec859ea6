package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/eventlog"
	"github.com/drover-dev/drover/internal/queue"
)

// Controller folds events and makes decisions.
type Controller struct {
	cfg   *config.Config
	js    jetstream.JetStream
	store *eventlog.Store
	log   *slog.Logger
	now   func() time.Time
	// claims revokes attempts of cancelled tasks (set by Run).
	claims *queue.Claims

	kick chan struct{}

	m *metrics // telemetry; no-op instruments unless a meter provider is installed

	// published is the decide loop's own: plan runs under the store's
	// read lock, and a lock taken there would order against waitApplied's
	// (c.mu, then the store's), which deadlocked with a commit waiting.
	published publishedJobs // jobs queued by this process

	mu     sync.Mutex
	folded *sync.Cond // broadcast after each commit, with mu
}

// New returns a controller over an open store.
func New(cfg *config.Config, js jetstream.JetStream, store *eventlog.Store, log *slog.Logger) *Controller {
	c := &Controller{
		cfg: cfg, js: js, store: store, log: log, now: time.Now,
		kick: make(chan struct{}, 1), published: publishedJobs{jobs: map[string]uint64{}},
	}
	c.folded = sync.NewCond(&c.mu)
	c.m = newMetrics(c)
	return c
}

// Run folds and decides until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	claims, err := queue.NewClaims(ctx, c.js, c.cfg.Queue.AckWait, c.now)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	c.claims = claims
	defer c.addReadyChecks()()
	if reg, err := c.m.observe(); err == nil {
		defer func() { _ = reg.Unregister() }()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := c.foldLoop(ctx); err != nil {
			errc <- err
			cancel(err)
		}
	}()
	go func() {
		defer wg.Done()
		c.decideLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		newLeaseMonitor(c).run(ctx)
	}()
	<-ctx.Done()
	// Wake anyone waiting for a fold.
	c.mu.Lock()
	c.folded.Broadcast()
	c.mu.Unlock()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// foldLoop reads the EVENTS stream from the sequence after the last one
// applied and folds it, committing a batch whenever it has caught up.
func (c *Controller) foldLoop(ctx context.Context) error {
	start := c.store.Applied() + 1
	cons, err := c.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err == nil {
		var it jetstream.MessagesContext
		if it, err = cons.Messages(jetstream.PullMaxMessages(1024)); err == nil {
			return c.fold(ctx, it, start)
		}
	}
	if ctx.Err() != nil {
		return nil // stopped before it started
	}
	return fmt.Errorf("controller: events consumer: %w", err)
}

// foldBatch bounds the events folded between two commits while the fold
// catches up; caught up, it commits after every event. A larger batch writes
// each busy record (an attempt has a dozen events) fewer times.
const foldBatch = 4096

func (c *Controller) fold(ctx context.Context, it jetstream.MessagesContext, start uint64) error {
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	c.log.Info("folding events", "from_seq", start)
	staged := 0
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return c.store.Commit()
			}
			c.log.Warn("events consumer", "err", err)
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			c.log.Warn("event without metadata", "err", err)
			continue
		}
		c.m.foldLag.Store(md.NumPending)
		traced := c.traceFold(ctx, msg, md.Sequence.Stream)
		if ev, ok := c.store.StageEvent(md.Sequence.Stream, msg.Data()); ok {
			staged++
			if ev != nil {
				c.m.recordFolded(ctx, md.Sequence.Stream, ev)
			} else if p := c.store.Poison(md.Sequence.Stream); p != nil {
				c.park(ctx, p, msg.Data())
			}
		}
		traced()
		if md.NumPending == 0 || staged >= foldBatch {
			if err := c.store.Commit(); err != nil {
				return err
			}
			staged = 0
			c.mu.Lock()
			c.folded.Broadcast()
			c.mu.Unlock()
			c.poke()
		}
	}
}

// park copies a poison event to the dead-letter stream, where `controller
// dead-letters` lists it. The projection keeps its own record either way.
func (c *Controller) park(ctx context.Context, p *eventlog.Poison, raw []byte) {
	c.log.Warn("poison event", "seq", p.Seq, "reason", p.Reason, "size", p.Size)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	reason := fmt.Sprintf("events seq %d: %s", p.Seq, p.Reason)
	if err := queue.PublishDeadLetter(pctx, c.js, "events", reason, raw); err != nil {
		c.log.Warn("park poison event", "seq", p.Seq, "err", err)
	}
}

func (c *Controller) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// waitApplied blocks until the fold has applied seq, or ctx ends.
func (c *Controller) waitApplied(ctx context.Context, seq uint64) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.folded.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.store.Applied() < seq {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		c.folded.Wait()
	}
	return nil
}

// decideRest is how many times as long as its last walk the decision
// function rests before walking again.
const decideRest = 4

// decideLoop derives decisions after every fold and on a timer, which also
// re-derives everything after a restart.
//
// A decision walks every task of every running flow. With thousands of
// tasks and events arriving without pause, walks would run back to back
// and take a core, and the controller's work would grow with the square of
// a flow's size. So after each walk the loop rests decideRest times as long
// as the walk took: decisions then take at most a fifth of a core whatever
// the flows' size, for a delay of the same order as the walk (microseconds
// for a hundred tasks, about 1.5 ms for 10,000: BenchmarkPlan). Folds that
// arrive meanwhile are decided on together.
func (c *Controller) decideLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		walk, err := c.decide(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("decide", "err", err)
		}
		if rest := decideRest * walk; rest > 100*time.Microsecond {
			select {
			case <-ctx.Done():
				return
			case <-time.After(rest):
			}
		}
	}
}
