package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/queue"
)

// Controller folds events and makes decisions.
type Controller struct {
	cfg   *config.Config
	js    jetstream.JetStream
	store *store.Store
	log   *slog.Logger
	now   func() time.Time
	// claims revokes attempts of cancelled tasks (set by Run).
	claims queue.ClaimRevoker
	// fleet is the worker registry as fleetLoop follows it: the live
	// workers, for the placement decisions and submit's warnings.
	fleet *fleet.View

	kick chan struct{}

	m *metrics // telemetry; no-op instruments unless a meter provider is installed

	// published is the decide loop's own: decisions runs under the store's
	// read lock, and a lock taken there would order against waitApplied's
	// (c.mu, then the store's), which deadlocked with a commit waiting.
	published publishedJobs // jobs queued by this process

	mu     sync.Mutex
	folded *sync.Cond // broadcast after each commit, with mu

	notifier foldNotifier // tells Subscribe's callers of each commit

	// ended sends the spans of what the fold ended, once it is committed
	// (tracing.go); the fold's goroutine's own.
	ended []func()
	open  openTracker // what the traced flows have open (tracing.go)

	// forges publishes pull requests and follows them (forgerun.go).
	forges *forgeRunner

	// events opens the EVENTS stream from a sequence for the fold: the
	// ordered consumer (orderedEvents), injected like the clock so that a
	// consumer failing mid-stream can be reproduced.
	events func(ctx context.Context, seq uint64) (jetstream.MessagesContext, error)

	// id names this controller among those sharing the log; term is the
	// term it leads, nil while it stands by (leader.go). leaseJS is the
	// connection the lease is kept on: one of its own, so that a renewal
	// never waits behind a round of ten thousand decisions (js when nil).
	id      string
	term    atomic.Pointer[leaderTerm]
	leaseJS jetstream.JetStream
	// known tells the runtimes submissions may name (ServeAPI's).
	known func(string) bool
	// started is when Run began, for the registry; roleChanged has the
	// registry write at once (registry.go).
	started     time.Time
	roleChanged chan struct{}
}

// New returns a controller over an open store.
func New(cfg *config.Config, js jetstream.JetStream, store *store.Store, log *slog.Logger) *Controller {
	c := &Controller{
		cfg: cfg, js: js, store: store, log: log, now: time.Now,
		kick: make(chan struct{}, 1), published: publishedJobs{jobs: map[string]uint64{}},
		fleet:       fleet.NewView(),
		roleChanged: make(chan struct{}, 1),
	}
	c.events = c.orderedEvents
	c.id = cfg.Controller.ID
	if c.id == "" {
		c.id = "controller"
	}
	c.folded = sync.NewCond(&c.mu)
	c.m = newMetrics(c)
	c.forges = newForgeRunner(c)
	return c
}

// Run folds until ctx ends, and campaigns for the leadership: while this
// controller leads a term, it decides too (leader.go). A controller alone
// is the leader of a group of one. When ctx ends it resigns, so that a
// standby takes over at once.
func (c *Controller) Run(ctx context.Context) error {
	c.started = time.Now()
	claims, err := queue.NewClaims(ctx, c.js, c.cfg.Queue.AckWait, c.now)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	c.claims = claims
	ljs := c.leaseJS
	if ljs == nil {
		ljs = c.js
	}
	lease, err := leadership.Open(ctx, ljs, leadership.Options{ID: c.id, TTL: c.cfg.Controller.LeaseTTL})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.addReadyChecks()()
	if reg, err := c.m.observe(); err == nil {
		defer func() { _ = reg.Unregister() }()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(5)
	go func() {
		defer wg.Done()
		if err := c.foldLoop(ctx); err != nil {
			errc <- err
			cancel(err)
		}
	}()
	go func() {
		defer wg.Done()
		c.foldBeforeCampaign(ctx)
		el := leadership.NewElector(lease, c.log)
		el.Observe = c.m.renewed
		el.Run(ctx, c.lead)
	}()
	// What the decisions ask of the forges, and following the pull
	// requests: side effects, like publishing jobs, of the controller
	// that decides.
	go func() {
		defer wg.Done()
		c.forges.run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.registryLoop(ctx, lease.TTL())
	}()
	go func() {
		defer wg.Done()
		c.fleetLoop(ctx)
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
// applied and folds it until ctx ends. When the consumer fails, it starts
// another from where the fold stopped.
//
// The consumer is an ordered one: R1, in memory, recreated by nats.go on a
// gap or a missed heartbeat. Its recreation is bounded (resetAttempts):
// with an unbounded one, a stream whose leader had been killed left the
// fold retrying the same consumer for minutes, the flow stalled, while a
// new consumer, with a new name, is placed afresh on the live servers.
func (c *Controller) foldLoop(ctx context.Context) error {
	wait := time.Second
	for first := true; ; first = false {
		start := c.store.Applied() + 1
		it, err := c.events(ctx, start)
		if err == nil {
			var progressed bool
			progressed, err = c.fold(ctx, it, start)
			var ce consumerError
			if !errors.As(err, &ce) {
				return err // ctx ended, or the store failed
			}
			if progressed {
				wait = time.Second
			}
		} else if first && ctx.Err() == nil {
			return fmt.Errorf("controller: events consumer: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		c.m.restarts.Add(ctx, 1)
		c.log.Warn("events consumer failed; starting another", "from_seq", c.store.Applied()+1, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// resetAttempts is how many times nats.go tries to recreate the fold's
// ordered consumer (each try waits up to 10 s) before the fold starts a
// new consumer itself.
const resetAttempts = 3

// orderedEvents opens an ordered consumer on the EVENTS stream from seq.
func (c *Controller) orderedEvents(ctx context.Context, seq uint64) (jetstream.MessagesContext, error) {
	cons, err := c.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq,
		MaxResetAttempts: resetAttempts,
	})
	if err != nil {
		return nil, err
	}
	return cons.Messages(jetstream.PullMaxMessages(1024))
}

// consumerError is a failure of the events consumer, after which the fold
// goes on with another; any other error from fold ends it.
type consumerError struct{ err error }

func (e consumerError) Error() string { return "events consumer: " + e.err.Error() }
func (e consumerError) Unwrap() error { return e.err }

// While the fold catches up it commits once the records it changed reach
// foldRecords, or once it has staged foldEvents events; caught up, it
// commits after every event.
//
// A commit encodes and writes every record changed since the last one, so
// a larger batch writes each busy record (an attempt has a dozen events)
// fewer times. Bounding it by events alone did not: a fleet of 1,000
// workers × 4 slots has 4,000 attempts in flight, whose events interleave,
// so each batch of 4,096 events changed some 4,000 attempts and as many
// tasks, and every attempt was encoded about once per event it had
// (BenchmarkRefold). Bounded by records, a commit writes at most
// foldRecords of them (some 20 MB of a batch at 2 KB a record).
const (
	foldRecords = 8192
	foldEvents  = 1 << 16
	// foldCheck is how often, in events staged, the fold counts the
	// records it changed.
	foldCheck = 256
)

// fold applies the events it reads from it until ctx ends (nil) or the
// consumer fails (a consumerError); either way what it staged is
// committed. It reports whether it applied any event.
//
// Goroutines read and decode the events ahead (decodeAhead of them) while
// this one applies them in order: decoding needs no state, and it was three
// fifths of the fold's CPU (docs/benchmarks.md).
func (c *Controller) fold(ctx context.Context, it jetstream.MessagesContext, start uint64) (progressed bool, err error) {
	defer context.AfterFunc(ctx, it.Stop)()
	events := readEvents(it)
	defer events.Stop()
	c.log.Info("folding events", "from_seq", start)
	c.ended = c.ended[:0] // of a fold not committed: refolded from start
	c.open.reset()
	staged := 0
	for m, ok := events.Next(); ok; m, ok = events.Next() {
		if m.err != nil {
			if cerr := c.store.Commit(); cerr != nil {
				return progressed, cerr
			}
			c.sendEnded()
			c.notifier.notify()
			if ctx.Err() != nil {
				return progressed, nil
			}
			// Closed by itself (the connection closed) or failed to
			// recreate its consumer.
			return progressed, consumerError{m.err}
		}
		progressed = true
		if m.md == nil {
			c.log.Warn("event without metadata", "err", m.mdErr)
			continue
		}
		seq := m.md.Sequence.Stream
		c.m.foldLag.Store(m.md.NumPending)
		traced := c.traceFold(ctx, m.msg, seq)
		if ev, ok := c.store.StageDecoded(seq, m.ev); ok {
			staged++
			if ev != nil {
				c.m.recordFolded(ctx, seq, ev)
			} else if p := c.store.Poison(seq); p != nil {
				c.park(ctx, p, m.msg.Data())
			}
		}
		traced()
		if m.md.NumPending == 0 || staged >= foldEvents || staged%foldCheck == 0 && c.store.Changed() >= foldRecords {
			if err := c.store.Commit(); err != nil {
				return progressed, err
			}
			c.sendEnded()
			staged = 0
			c.mu.Lock()
			c.folded.Broadcast()
			c.mu.Unlock()
			c.poke()
			c.notifier.notify()
		}
	}
	return progressed, consumerError{errors.New("the events reader ended")} // it always says why first
}

// The reader decodes up to decodeAhead events ahead of the fold, and reads
// as many more, within aheadBytes of messages in all. While the fold
// commits it takes no event (BenchmarkFold: three commits of some 56,000
// events, 0.13 s each), and with 512 decoded ahead the decoders had
// filled their queues after a few milliseconds and the second core idled
// for the rest of the commit: with 8,192, 111,500 against 102,400 events/s
// (medians of 8 in one process, alternating; docs/benchmarks.md), for some
// 30 MB more while the fold catches up. Events are about 1 KB as Drover
// writes them, so the count binds first; the bytes bound them when they
// are large (up to event.MaxEventSize each). The consumer buffers up to
// 1,024 messages more (PullMaxMessages).
const (
	decodeAhead = 8192
	aheadBytes  = 16 << 20
)

// foldMsg is an event read and decoded for the fold, or the error that
// ended the reading (err, the last one sent).
type foldMsg struct {
	msg   jetstream.Msg
	md    *jetstream.MsgMetadata
	mdErr error
	ev    projection.Decoded
	err   error
	ahead int // the bytes of aheadBytes it holds
}

// eventReader gives the events of a consumer decoded for the fold, in the
// order read. A goroutine reads them and decoders goroutines decode them in
// turn: decoding was the fold's busiest step, on one core of two
// (docs/benchmarks.md).
type eventReader struct {
	it      jetstream.MessagesContext
	decoded [decoders]chan foldMsg
	next    int // the decoder of the next event
	ahead   byteBudget
}

// readEvents reads it until it fails or is stopped; the error that ends it
// comes last.
func readEvents(it jetstream.MessagesContext) *eventReader {
	r := &eventReader{it: it}
	r.ahead.init(aheadBytes)
	var in [decoders]chan foldMsg
	for k := range decoders {
		in[k] = make(chan foldMsg, decodeAhead/decoders)
		r.decoded[k] = make(chan foldMsg, decodeAhead/decoders)
		go func() {
			defer close(r.decoded[k])
			for m := range in[k] {
				if m.md != nil {
					m.ev = projection.DecodeForFold(m.msg.Subject(), m.msg.Data())
				}
				r.decoded[k] <- m
			}
		}()
	}
	go func() {
		// Event i goes to decoder i % decoders, and Next takes it back
		// from there.
		for i := 0; ; i++ {
			msg, err := it.Next()
			if err != nil {
				in[i%decoders] <- foldMsg{err: err}
				break
			}
			md, err := msg.Metadata()
			// Next gives the bytes back, Stop too, so this waits for the
			// fold, never forever.
			ahead := r.ahead.take(len(msg.Data()))
			in[i%decoders] <- foldMsg{msg: msg, md: md, mdErr: err, ahead: ahead}
		}
		for k := range decoders {
			close(in[k])
		}
	}()
	return r
}

// Next returns the next event, or false once the one with the error was
// taken.
func (r *eventReader) Next() (foldMsg, bool) {
	m, ok := <-r.decoded[r.next]
	r.next = (r.next + 1) % decoders
	r.ahead.give(m.ahead)
	return m, ok
}

// Stop stops the consumer and returns once the reader has seen it, its
// goroutines ended.
func (r *eventReader) Stop() {
	r.it.Stop()
	for _, ok := r.Next(); ok; _, ok = r.Next() {
	}
}

// byteBudget is a number of bytes taken by one goroutine and given back by
// another: an atomic count, and a channel to wake the taker when what it
// waits for came back (an event's turn costs an atomic add on either side,
// not a lock).
type byteBudget struct {
	size int64
	free atomic.Int64 // below 0 while take waits
	back chan struct{}
	// waits counts the takes that waited (tests look).
	waits atomic.Int64
}

func (b *byteBudget) init(size int64) {
	b.size = size
	b.free.Store(size)
	b.back = make(chan struct{}, 1)
}

// take takes n bytes, or the whole budget if n is larger, waiting until
// they are free; it returns how many it took.
func (b *byteBudget) take(n int) int {
	n = int(min(int64(n), b.size))
	if b.free.Add(-int64(n)) >= 0 {
		return n
	}
	b.waits.Add(1)
	for b.free.Load() < 0 {
		<-b.back
	}
	return n
}

// give gives back n bytes take took.
func (b *byteBudget) give(n int) {
	if n == 0 {
		return
	}
	if now := b.free.Add(int64(n)); now >= 0 && now-int64(n) < 0 {
		select {
		case b.back <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
}

// decoders is how many goroutines decode events for the fold.
const decoders = 2

// park copies a poison event to the dead-letter stream, where `controller
// dead-letters` lists it. The projection keeps its own record either way.
func (c *Controller) park(ctx context.Context, p *projection.Poison, raw []byte) {
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
// A decision walks every open task of every running flow (an ended task
// whose attempt has ended too is not walked). With thousands of open
// tasks and events arriving without pause, walks would run back to back
// and take a core, and the controller's work would grow with the square of
// a flow's size. So after each walk the loop rests decideRest times as long
// as the walk took: decisions then take at most a fifth of a core whatever
// the flows' size, for a delay of the same order as the walk (microseconds
// for a hundred tasks, about 1.5 ms for 10,000: BenchmarkDecisions). Folds that
// arrive meanwhile are decided on together.
func (c *Controller) decideLoop(ctx context.Context) {
	// What an earlier term published is not this term's: every queued
	// attempt gets its job again, under this term's epoch.
	c.published = publishedJobs{jobs: map[string]uint64{}}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			case <-t.C:
			}
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
