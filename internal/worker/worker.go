package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/objstore"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/attempt"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/startup"
)

// ErrShutdown is the cause given to attempts stopped because the worker stops.
var ErrShutdown = errors.New("worker: shutting down")

// Worker claims and runs attempts.
type Worker struct {
	cfg      *config.Config
	js       jetstream.JetStream
	log      *slog.Logger
	claims   queue.Claimer
	cancels  queue.CancelWatcher // the controller's stop signals
	runner   Runner
	own      *attempt.Runner // runner, unless WithRunner gave another
	adapters map[string]adapter.Adapter
	slots    chan struct{}
	// finishing are the places of attempts that gave their slot back to
	// finish (slot.go).
	finishing chan struct{}
	now       func() time.Time
	red       *redact.Redactor // masks secret values in events and logs

	mu          sync.Mutex
	running     map[string]*held // attempts held by this process
	health      map[string]*fleet.RuntimeHealth
	started     time.Time
	notClaiming string // why the worker claims nothing now ("" while it claims)
	// ignoredLogged is when an ignored stop signal was last logged.
	ignoredLogged time.Time

	disk *diskGate
	// paused are the runtimes whose jobs this worker does not pull for a
	// while, one of their attempts having met a rate limit (pause.go).
	paused pauses
	// claimTimes, if set, is told each claim's times (WithClaimTimes).
	claimTimes func(ClaimTimes)
	// fetches ends the claim loops' fetches when the connection comes
	// back (fetch.go).
	fetches *reconnects

	// stopClaiming ends the claim loops; handBack ends what runs (attempts,
	// heartbeats, the health loop). Stop calls the first at once and the
	// second when the drain is over.
	stopClaiming context.CancelCauseFunc
	endRuns      context.CancelCauseFunc
	runCtx       context.Context
	stopOnce     sync.Once
	wg           sync.WaitGroup // every goroutine of the worker
	attempts     sync.WaitGroup // the running attempts

	m           *workerMetrics
	ignored     atomic.Int64 // stop signals not obeyed
	loopsActive atomic.Bool  // claim loops started (readiness)
	rmChecks    []func()

	sandbox sandboxState // how attempts are confined (sandbox.go)

	// epochs is the latest leader epoch a job showed: a job or a cancel
	// signal of an older leader is refused (a leader paused or cut off
	// that wakes up after another took over).
	epochs queue.EpochFence

	// regMu makes each registration write the state it read: two writers
	// (the claim loops saying why they claim nothing, the start and the
	// health loop) would otherwise let an older snapshot land last.
	regMu sync.Mutex
}

// New builds a worker from its configuration. It connects to nothing:
// CheckRuntimes can tell a host without a usable runtime before NATS is
// reached, and Start is given the connection.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Worker, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	red := secrets(cfg)
	log = slog.New(redact.Handler(log.Handler(), red))
	sbs := resolveSandbox(cfg, o.probe, o.dev)
	w := &Worker{
		cfg: cfg, log: log.With("worker", cfg.Worker.ID), red: red,
		runner:     o.runner,
		sandbox:    sbs,
		fetches:    newReconnects(),
		claimTimes: o.claimTimes,
		adapters:   map[string]adapter.Adapter{},
		slots:      make(chan struct{}, cfg.Worker.Slots),
		finishing:  make(chan struct{}, cfg.Worker.Slots),
		now:        time.Now,
		running:    map[string]*held{},
		health:     map[string]*fleet.RuntimeHealth{},
		m:          newWorkerMetrics(),
	}
	if w.runner == nil {
		own, err := newAttemptRunner(cfg, log, red, sbs)
		if err != nil {
			return nil, err
		}
		w.runner, w.own = own, own
	}
	w.disk = &diskGate{dir: cfg.Worker.WorkDir, min: cfg.Worker.MinFreeDisk, free: freeBytes, sweep: w.runner.Sweep, now: w.now}
	for _, name := range cfg.Worker.Runtimes {
		ad, err := NewAdapter(name, cfg.Runtimes[name])
		if err != nil {
			return nil, err
		}
		w.adapters[name] = ad
	}
	return w, nil
}

// newAttemptRunner builds the worker's own runner: its repo cache in the
// work dir, its git confined as the attempts are.
func newAttemptRunner(cfg *config.Config, log *slog.Logger, red *redact.Redactor, sbs sandboxState) (*attempt.Runner, error) {
	idle := 0
	if cfg.Worker.ReuseWorktrees && !cfg.Worker.KeepWorktrees {
		idle = cfg.Worker.Slots
	}
	checkouts, err := newCheckouts(cfg, log, sbs, idle)
	if err != nil {
		return nil, err
	}
	return &attempt.Runner{Checkouts: checkouts, WorkDir: cfg.Worker.WorkDir, KeepWorktrees: cfg.Worker.KeepWorktrees,
		KeepFailed: cfg.Worker.KeepFailedWorktrees, Redact: red, Logger: log,
		Sandbox: sbs.sb, SandboxOff: sbs.off, SandboxDeny: cfg.SandboxDeny()}, nil
}

// CheckRuntimes fingerprints the runtimes and fails when none is usable on
// this host: a configuration error, told before waiting for NATS.
func (w *Worker) CheckRuntimes(ctx context.Context) error {
	if w.checkHealth(ctx) == 0 {
		return fmt.Errorf("worker: none of the runtimes %v is available on this host", w.cfg.Worker.Runtimes)
	}
	return nil
}

// Start claims over nc: it checks the runtimes unless CheckRuntimes did,
// waits with wait (nil: one of its own) for the buckets and consumers the
// controller's streams hold (docs/operations.md#start-order), and returns
// once the worker is claiming. It creates no stream or bucket: they are
// the controller's. A ctx ending while it waits returns an error wrapping
// startup.ErrStopped, with nothing left running.
func (w *Worker) Start(ctx context.Context, nc *nats.Conn, wait *startup.Waiter) error {
	if err := os.MkdirAll(w.cfg.Worker.WorkDir, 0o755); err != nil {
		return fmt.Errorf("worker: work dir: %w", err)
	}
	if w.started.IsZero() {
		if err := w.CheckRuntimes(ctx); err != nil {
			return err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w.js = js
	w.cancels = queue.NewCancels(nc)
	if w.own != nil {
		w.own.Artifacts = objstore.NewArtifacts(js)
	}
	w.logSandbox()
	if wait == nil {
		wait = startup.New(w.log, startup.Options{})
	}
	consumers, err := w.waitLayout(ctx, wait)
	if err != nil {
		return err
	}
	// Nothing runs here yet: whatever a previous process of this worker
	// left in the work dir (it may have been killed mid-attempt) goes now.
	if err := w.runner.Sweep(ctx, nil); err != nil {
		w.log.Warn("sweep work dir", "err", err)
	}
	return w.startLoops(ctx, consumers)
}

// waitLayout waits for the claims bucket, the worker registry and the
// artifacts store (their existence says the controller's Ensure is done),
// then for this worker's consumer of each runtime. A step this NATS user
// may not take ends it: waiting would not change the permissions.
func (w *Worker) waitLayout(ctx context.Context, wait *startup.Waiter) (map[string]jetstream.Consumer, error) {
	err := wait.Wait(ctx, "Drover's buckets", func(ctx context.Context) error {
		if err := queue.CheckBuckets(ctx, w.js); err != nil {
			return natsconn.Denied(w.js.Conn(), err)
		}
		claims, err := queue.NewClaims(ctx, w.js, w.cfg.Queue.AckWait, w.now)
		w.claims = claims
		return natsconn.Denied(w.js.Conn(), err)
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	consumers := map[string]jetstream.Consumer{}
	for name := range w.adapters {
		cname := queue.AttemptConsumerName(w.cfg.Worker.Pool, name)
		err := wait.Wait(ctx, "consumer "+cname, func(ctx context.Context) error {
			cons, err := queue.EnsureAttemptConsumer(ctx, w.js, w.cfg.Worker.Pool, name, queue.ConsumerOptions{AckWait: w.cfg.Queue.AckWait})
			consumers[name] = cons
			return natsconn.Denied(w.js.Conn(), err)
		})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	return consumers, nil
}

// startLoops starts a claim loop per runtime, the cancel-signal listener
// and the health loop, registers the worker, and adds its readiness checks.
func (w *Worker) startLoops(ctx context.Context, consumers map[string]jetstream.Consumer) error {
	runCtx, endRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	claimCtx, stopClaiming := context.WithCancelCause(runCtx)
	w.runCtx, w.endRuns, w.stopClaiming = runCtx, endRuns, stopClaiming
	// The controller's stop signals for cancelled attempts; every worker
	// hears all of them and acts on those it holds. Anyone who may publish
	// there can send anything: a signal that does not decode, or names
	// another attempt than its subject's, is ignored and counted.
	unsubscribe, err := w.cancels.WatchCancels(w.onCancelSignal)
	if err != nil {
		stopClaiming(err)
		endRuns(err)
		return fmt.Errorf("worker: %w", err)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		<-runCtx.Done()
		_ = unsubscribe()
	}()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.fetches.watch(claimCtx, w.js.Conn())
	}()
	for name, ad := range w.adapters {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.claimLoop(claimCtx, name, ad, consumers[name])
		}()
	}
	if err := w.register(ctx); err != nil {
		w.log.Warn("register worker", "err", err)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.healthLoop(runCtx)
	}()
	w.loopsActive.Store(true)
	w.addReadyChecks()
	return nil
}

// checkHealth fingerprints every runtime afresh and returns how many are
// healthy. Only healthy runtimes are claimed for.
func (w *Worker) checkHealth(ctx context.Context) int {
	if w.started.IsZero() {
		w.started = w.now()
	}
	healthy := 0
	for name, ad := range w.adapters {
		h := Fingerprint(ctx, name, w.cfg.Runtimes[name].Adapter, ad, w.now())
		if h.Healthy {
			healthy++
		}
		w.mu.Lock()
		prev := w.health[name]
		w.health[name] = h
		w.mu.Unlock()
		switch {
		case prev == nil && h.Healthy:
			w.log.Info("serving runtime", "runtime", name, "binary", h.Binary, "version", h.Version, "pool", w.cfg.Worker.Pool)
		case (prev == nil || prev.Healthy) && !h.Healthy:
			w.log.Warn("runtime unavailable, not claiming its jobs", "runtime", name, "err", h.Error)
		case prev != nil && !prev.Healthy && h.Healthy:
			w.log.Info("runtime healthy again", "runtime", name, "version", h.Version)
		}
	}
	return healthy
}

// Fingerprint checks one runtime afresh: binary found, executable, version,
// capabilities. The worker registers it; `worker runtime health` prints it.
func Fingerprint(ctx context.Context, name, adapterName string, ad adapter.Adapter, now time.Time) *fleet.RuntimeHealth {
	h := &fleet.RuntimeHealth{Name: name, Adapter: adapterName, Checked: now.UTC()}
	var info *adapter.Info
	var err error
	if hc, ok := ad.(adapter.HealthChecker); ok {
		info, err = hc.Check(ctx)
	} else {
		info, err = ad.Initialize(ctx)
	}
	if caps, cerr := json.Marshal(ad.Capabilities()); cerr == nil {
		h.Capabilities = caps
	}
	if ev := adapter.Evaluate(ad, ""); ev.Provider != "" {
		h.Provider, h.Model = ev.Provider, ev.Model // a native runtime's model API
	}
	if err != nil {
		h.Error = err.Error()
	} else {
		h.Healthy, h.Binary, h.Version = true, info.Binary, info.Version
	}
	return h
}

func (w *Worker) healthy(runtime string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.health[runtime]
	return h != nil && h.Healthy
}

func (w *Worker) registration() *fleet.Registration {
	host, _ := os.Hostname()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &fleet.Registration{
		ID: w.cfg.Worker.ID, Host: host, Pool: w.cfg.Worker.Pool, Slots: w.cfg.Worker.Slots,
		Busy: max(len(w.running)-len(w.finishing), 0), Finishing: len(w.finishing), Started: w.started.UTC(), Seen: w.now().UTC(), NotClaiming: w.notClaiming,
		Sandbox: w.sandbox.String(), RenewMS: w.cfg.Worker.HealthInterval.Milliseconds(),
	}
	for _, h := range w.health {
		rh := *h
		rh.Sandbox = r.Sandbox
		r.Runtimes = append(r.Runtimes, rh)
	}
	sort.Slice(r.Runtimes, func(i, j int) bool { return r.Runtimes[i].Name < r.Runtimes[j].Name })
	return r
}

// register writes the worker's registration as it is now.
func (w *Worker) register(ctx context.Context) error {
	w.regMu.Lock()
	defer w.regMu.Unlock()
	return fleet.Register(ctx, w.js, w.registration())
}

// healthLoop re-fingerprints the runtimes and renews the registration; on
// stop it deregisters.
func (w *Worker) healthLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.Worker.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := fleet.Deregister(dctx, w.js, w.cfg.Worker.ID); err != nil {
				w.log.Warn("deregister worker", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
		w.checkHealth(ctx)
		if err := w.register(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("renew worker registration", "err", err)
		}
		if err := w.runner.Sweep(ctx, nil); err != nil && ctx.Err() == nil {
			w.log.Warn("sweep work dir", "err", err)
		}
	}
}

// Stop drains the worker: it claims nothing more, lets the running attempts
// finish for up to worker.drain_timeout, then hands back those still running
// (their CLIs are stopped, their claims released and their jobs nak'd, so
// another worker takes them over at once). Idempotent; Wait waits for it.
func (w *Worker) Stop() {
	w.stopOnce.Do(func() {
		w.loopsActive.Store(false)
		for _, rm := range w.rmChecks {
			rm()
		}
		w.rmChecks = nil
		if w.stopClaiming == nil {
			return // never started
		}
		w.stopClaiming(ErrShutdown)
		w.setNotClaiming("draining: the worker is stopping")
		drained := make(chan struct{})
		go func() {
			w.attempts.Wait()
			close(drained)
		}()
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			t := time.NewTimer(w.cfg.Worker.DrainTimeout)
			defer t.Stop()
			select {
			case <-drained:
			case <-t.C:
				w.log.Warn("drain timeout: handing running attempts back", "drain_timeout", w.cfg.Worker.DrainTimeout, "running", w.busy())
			case <-w.runCtx.Done():
			}
			w.endRuns(ErrShutdown)
		}()
		if n := w.busy(); n > 0 {
			w.log.Info("draining: no new claims; waiting for running attempts", "running", n, "drain_timeout", w.cfg.Worker.DrainTimeout)
		}
	})
}

// HandBack hands the running attempts back now, without waiting out the
// drain (a second SIGTERM, or a process that ends anyway). It implies Stop.
func (w *Worker) HandBack() {
	w.Stop()
	if w.endRuns != nil {
		w.endRuns(ErrShutdown)
	}
}

// Wait blocks until every goroutine of the worker has returned.
func (w *Worker) Wait() { w.wg.Wait() }

func (w *Worker) busy() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// setNotClaiming records why the worker claims nothing ("" when it claims
// again), logging each change once.
func (w *Worker) setNotClaiming(why string) {
	w.mu.Lock()
	prev := w.notClaiming
	w.notClaiming = why
	w.mu.Unlock()
	switch {
	case why == prev:
		return
	case why != "":
		w.log.Warn("not claiming attempts", "reason", why)
	default:
		w.log.Info("claiming attempts again", "was", prev)
	}
	// Tell the fleet now rather than at the next health check.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.register(ctx); err != nil {
		w.log.Warn("update worker registration", "err", err)
	}
}

// claimLoop pulls one job whenever a slot is free.
func (w *Worker) claimLoop(ctx context.Context, runtime string, ad adapter.Adapter, cons jetstream.Consumer) {
	backoff := 100 * time.Millisecond
	for {
		if err := w.sandbox.unavailable; err != nil {
			// No silent downgrade: nothing runs unconfined unless an
			// operator said so (worker.sandbox: off).
			w.setNotClaiming("sandbox unavailable: " + sandbox.Reason(err))
			select {
			case <-time.After(w.cfg.Worker.HealthInterval):
				continue
			case <-ctx.Done():
				return
			}
		}
		if err := w.disk.check(ctx); err != nil {
			// No room for another worktree: claim nothing until there is.
			w.setNotClaiming(err.Error())
			select {
			case <-time.After(diskCheckEvery):
				continue
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() == nil {
			w.setNotClaiming("")
		}
		if !w.healthy(runtime) {
			// Jobs for an unhealthy runtime wait for a worker that has it.
			select {
			case <-time.After(w.cfg.Worker.HealthInterval):
				continue
			case <-ctx.Done():
				return
			}
		}
		// Wait for a free slot without keeping it: every runtime's loop
		// fetches while a slot is free, so a worker with fewer slots than
		// runtimes still hears each of them at once. A fetch that waits
		// holds no slot; the job it brings takes one.
		select {
		case w.slots <- struct{}{}:
			<-w.slots
		case <-ctx.Done():
			return
		}
		if !w.paused.wait(ctx, runtime, w.now) {
			return
		}
		fctx, cancel := w.fetches.fetchContext(ctx)
		msg, err := cons.Next(fetchOpts(fctx)...)
		delivered := w.now()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A fetch that expired, or that a reconnection ended, is
			// asked again at once.
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				w.log.Warn("fetch job", "runtime", runtime, "err", err)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(backoff*2, 5*time.Second)
			}
			continue
		}
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		if d := w.paused.left(runtime, w.now()); d > 0 {
			// Fetched as the pause began: back for another worker, or
			// for the controller to withdraw.
			_ = msg.NakWithDelay(min(d, pausedNak))
			continue
		}
		select {
		case w.slots <- struct{}{}:
		default:
			// Another runtime's job took the last slot meanwhile: give
			// this one back at once for an idle worker.
			_ = msg.NakWithDelay(100 * time.Millisecond)
			continue
		}
		backoff = 100 * time.Millisecond
		w.goHandle(ad, msg, delivered)
	}
}

// goHandle handles a delivered job on a goroutine of its own, in the slot
// the claim loop took for it.
func (w *Worker) goHandle(ad adapter.Adapter, msg jetstream.Msg, delivered time.Time) {
	w.wg.Add(1)
	w.attempts.Add(1)
	s := w.takenSlot()
	go func() {
		defer w.wg.Done()
		defer w.attempts.Done()
		defer s.release()
		// The attempt outlives the claim loop: a draining worker stops
		// claiming but lets it finish.
		w.handle(w.runCtx, ad, msg, delivered, s)
	}()
}

// handle runs one job delivered at delivered to its end, or hands it back.
func (w *Worker) handle(ctx context.Context, ad adapter.Adapter, msg jetstream.Msg, delivered time.Time, s *slot) {
	job := w.decode(ctx, msg)
	if job == nil || !w.admit(ctx, msg, job) {
		return
	}
	ctx, jt := w.traceJob(ctx, msg, job)
	defer jt.end()
	d := &delivery{msg: msg, job: job, trace: jt, log: w.log.With("attempt", job.Attempt), slot: s}
	if w.sandbox.sb == nil && w.own != nil {
		d.log.Warn("this attempt runs without the sandbox", "why", w.sandbox.off)
	}
	md, err := msg.Metadata()
	if err == nil && md.NumDelivered > 1 {
		d.log.Info("job redelivered", "delivery", md.NumDelivered)
	}
	h := w.hold(job.Attempt)
	if h == nil {
		// Redelivered while this very process runs it: the original delivery
		// will be acked.
		_ = msg.NakWithDelay(w.cfg.Queue.AckWait)
		return
	}
	defer w.unhold(job.Attempt)
	d.cancel, d.cancelReason = h.cancel, h.reason
	if !w.claim(ctx, d) {
		return
	}
	if w.claimTimes != nil && md != nil {
		w.claimTimes(ClaimTimes{Attempt: job.Attempt, Stored: md.Timestamp, Delivered: delivered, Claimed: w.now()})
	}
	w.run(ctx, ad, d)
}

// delivery is one delivered job on its way through handle.
type delivery struct {
	msg    jetstream.Msg
	job    *queue.Job
	trace  *jobTrace
	log    *slog.Logger
	lease  *queue.Lease    // once claimed
	slot   *slot           // nil outside a claim loop's slot
	cancel <-chan struct{} // closed by the controller's cancel signal
	// cancelReason says what the cancel signal said, once cancel closed.
	cancelReason func() string
}

// decode reads a delivered job. A job that cannot be read is poison: it is
// parked as a dead letter and terminated, and decode returns nil. One whose
// body could not be fetched from the object store goes back for later.
func (w *Worker) decode(ctx context.Context, msg jetstream.Msg) *queue.Job {
	job, err := queue.ReadJob(ctx, w.js, msg.Headers(), msg.Data())
	if err == nil {
		return job
	}
	if !errors.Is(err, queue.ErrBadJob) {
		w.log.Warn("job body not read; the job goes back", "subject", msg.Subject(), "err", natsconn.Denied(w.js.Conn(), err))
		_ = msg.NakWithDelay(5 * time.Second)
		return nil
	}
	w.log.Error("poison job terminated", "subject", msg.Subject(), "err", err)
	// Parking must get through even while the worker stops.
	if perr := queue.PublishDeadLetter(context.WithoutCancel(ctx), w.js, "attempts", err.Error(), msg.Data()); perr != nil {
		w.log.Error("park poison job", "err", perr)
	}
	_ = msg.Term()
	return nil
}

// admit reports whether a job comes from a leader no older than the latest
// this worker has seen, and learns its epoch. A job of an older leader is
// refused and terminated: the leader of the day queues that attempt again
// under its own epoch if it still wants it run.
func (w *Worker) admit(ctx context.Context, msg jetstream.Msg, job *queue.Job) bool {
	epoch, err := queue.LeaderEpoch(msg.Headers())
	if err == nil && w.epochs.Job(epoch) {
		return true
	}
	w.m.claim(ctx, "old_epoch")
	if err == nil {
		err = fmt.Errorf("leader epoch %d, older than %d", epoch, w.epochs.Latest())
	}
	w.log.Info("job of an earlier leader refused", "attempt", job.Attempt, "err", err)
	_ = msg.Term()
	return false
}

// claim takes the attempt's claim for this worker, and reports whether it
// did. A job whose attempt is finished is a duplicate and is acked; one
// held by another worker, or a claim that failed, goes back for later.
func (w *Worker) claim(ctx context.Context, d *delivery) bool {
	acquire := w.claims.Acquire
	if d.job.Kind == drovertype.JobIntegrate {
		acquire = w.claims.AcquireOrTakeOver
	}
	lease, err := acquire(context.WithoutCancel(ctx), d.job.Attempt, w.cfg.Worker.ID)
	switch {
	case errors.Is(err, queue.ErrFinished):
		w.m.claim(ctx, "finished")
		d.log.Info("attempt already finished; acking duplicate job")
		_ = d.msg.Ack()
		return false
	case errors.Is(err, queue.ErrHeld):
		w.m.claim(ctx, "held")
		// Held by a live worker, or by a silent one the controller has
		// not declared lost yet: either way not ours to run.
		d.log.Info("attempt held by another worker; not running it again")
		_ = d.msg.NakWithDelay(w.cfg.Queue.AckWait)
		return false
	case err != nil:
		w.m.claim(ctx, "error")
		d.log.Warn("claim", "err", err)
		_ = d.msg.NakWithDelay(time.Second)
		return false
	}
	w.m.claim(ctx, "claimed")
	d.lease, d.log = lease, d.log.With("epoch", lease.Epoch())
	return true
}

// run runs a claimed job while heartbeats hold it, stores its result and
// acks it. Whatever stops it short hands the job back.
func (w *Worker) run(ctx context.Context, ad adapter.Adapter, d *delivery) {
	// Acks and reports must get through even while the worker stops;
	// hand-backs are recorded on the job's span.
	bg := context.WithoutCancel(ctx)
	em := d.trace.wrap(&emitter{js: w.js, job: d.job, epoch: d.lease.Epoch(), now: w.now, red: w.red, m: w.m})
	runCtx, stop := context.WithCancelCause(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(runCtx, stop, d.msg, d.lease, d.log)
	}()
	// Heartbeats end before the claim is finished or released.
	stopHeartbeat := sync.OnceFunc(func() { stop(nil); <-hbDone })
	defer stopHeartbeat()

	if err := em.Emit(runCtx, event.AttemptClaimed, "", event.AttemptClaimedData{Worker: w.cfg.Worker.ID, Host: hostname()}); err != nil {
		w.handBack(bg, d, err)
		return
	}
	typ, result, err := w.execute(runCtx, ad, d, em)
	if err != nil {
		w.handBack(bg, d, err)
		return
	}
	// The report must be stored before the job is acked.
	if err := em.Emit(context.WithoutCancel(runCtx), typ, "", result); err != nil {
		w.handBack(bg, d, err)
		return
	}
	stopHeartbeat()
	if err := d.lease.Finish(bg); err != nil {
		d.log.Warn("mark claim finished", "err", err)
	}
	if err := d.msg.DoubleAck(bg); err != nil {
		d.log.Warn("ack job", "err", err)
	}
}

// execute does what the job asks, building a flow's integration branch or
// running an attempt, and returns the event that reports it.
func (w *Worker) execute(ctx context.Context, ad adapter.Adapter, d *delivery, em attempt.Emitter) (event.Type, any, error) {
	job := &attempt.Job{Job: d.job, Epoch: d.lease.Epoch(), Validator: w.validator(d.job.Review),
		Cancel: d.cancel, CancelReason: d.cancelReason, Finishing: d.slot.finish}
	if job.Kind == drovertype.JobIntegrate {
		res, err := w.runner.Integrate(ctx, job)
		if err != nil {
			return "", nil, err
		}
		d.log.Info("integration built", "branch", res.Branch, "commit", res.Commit, "error", res.Error)
		return event.FlowIntegrated, res, nil
	}
	out := newOutput(w.js, d.job, w.red)
	rep, err := w.runner.Run(ctx, job, ad, em, w.m.countOutput(job.Runtime, out.write))
	out.close()
	if err != nil {
		return "", nil, err
	}
	d.log.Info("attempt ran", "success", rep.Success, "exit", rep.ExitCode)
	cd := w.cfg.Cooldown.WithDefaults()
	if until, ok := w.paused.limit(job.Runtime, rep, w.now(), cd.Default, cd.Max); ok {
		d.log.Info("runtime rate limited: pulling none of its jobs until then", "runtime", job.Runtime, "until", until)
	}
	return event.AttemptReported, rep, nil
}

// validator is the adapter of the validator runtime a review asks for, or
// nil when the job asks for no review.
func (w *Worker) validator(r *queue.Review) adapter.Adapter {
	if r == nil {
		return nil
	}
	ad := w.adapters[r.Runtime]
	if ad == nil {
		// Not served for jobs here, but it may be configured: a validator
		// need not run tasks of its own. An unconfigured one fails its
		// Initialize, and the review says so.
		ad, _ = NewAdapter(r.Runtime, w.cfg.Runtimes[r.Runtime])
	}
	if ad == nil {
		ad = adapter.NewCommand(r.Runtime, config.Runtime{})
	}
	return ad
}

// handBack leaves a job for another delivery. A superseded claim is not ours
// to touch; otherwise the claim is released so the next holder need not wait
// out the lease.
func (w *Worker) handBack(ctx context.Context, d *delivery, cause error) {
	handedBack(ctx, cause)
	if errors.Is(cause, queue.ErrSuperseded) {
		d.log.Warn("claim superseded; abandoning run", "err", cause)
		return
	}
	d.log.Warn("handing attempt back", "cause", cause)
	if err := d.lease.Release(ctx); err != nil {
		d.log.Warn("release claim", "err", err)
	}
	_ = d.msg.Nak()
}

// heartbeat keeps the job and the claim alive while the attempt runs.
func (w *Worker) heartbeat(ctx context.Context, stop context.CancelCauseFunc, msg jetstream.Msg, lease *queue.Lease, log *slog.Logger) {
	t := time.NewTicker(w.cfg.Queue.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := msg.InProgress(); err != nil {
			log.Warn("job heartbeat", "err", err)
		}
		if err := lease.Renew(ctx); err != nil {
			if errors.Is(err, queue.ErrSuperseded) {
				stop(err)
				return
			}
			log.Warn("claim heartbeat", "err", err)
		}
	}
}

// held is an attempt this process runs; closing cancel stops its CLI.
type held struct {
	cancel chan struct{}
	once   sync.Once
	why    string // what the stop signal said; set before cancel closes
}

// reason is why the attempt was cancelled, once cancel has closed.
func (h *held) reason() string {
	select {
	case <-h.cancel:
		return h.why
	default:
		return ""
	}
}

// hold marks an attempt as run here; nil means it already is.
func (w *Worker) hold(id string) *held {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[id] != nil {
		return nil
	}
	h := &held{cancel: make(chan struct{})}
	w.running[id] = h
	w.m.running.Add(context.Background(), 1)
	return h
}

// onCancelSignal handles a message on drover.control.cancel.*.
func (w *Worker) onCancelSignal(m *nats.Msg) {
	sig, err := queue.DecodeCancelSignal(m.Subject, m.Data)
	if err != nil {
		w.ignoredSignal(m.Subject, err)
		return
	}
	if epoch, err := queue.LeaderEpoch(m.Header); err != nil || !w.epochs.Cancel(epoch) {
		if err == nil {
			err = fmt.Errorf("leader epoch %d, older than %d", epoch, w.epochs.Latest())
		}
		w.ignoredSignal(m.Subject, err)
		return
	}
	w.cancelHeld(sig)
}

// cancelHeld stops the CLI of the attempt a stop signal names, if it is
// held here.
func (w *Worker) cancelHeld(sig queue.CancelSignal) {
	w.mu.Lock()
	h := w.running[sig.Attempt]
	w.mu.Unlock()
	if h != nil {
		h.once.Do(func() {
			w.log.Info("cancel signal: stopping attempt", "attempt", sig.Attempt, "by", sig.By, "reason", sig.Reason)
			h.why = sig.Reason
			if h.why == "" {
				h.why = "cancelled by the " + sig.By
			}
			close(h.cancel)
		})
	}
}

// ignoredSignal counts a stop signal that was not obeyed, and says so in
// the log at most once a minute: junk must not flood it either.
func (w *Worker) ignoredSignal(subject string, err error) {
	w.m.ignoredSignals.Add(context.Background(), 1)
	n := w.ignored.Add(1)
	now := w.now()
	w.mu.Lock()
	quiet := now.Sub(w.ignoredLogged) < time.Minute
	if !quiet {
		w.ignoredLogged = now
	}
	w.mu.Unlock()
	if !quiet {
		w.log.Warn("cancel signal ignored", "subject", truncate(subject, 200), "err", err, "ignored_so_far", n)
	}
}

// truncate cuts s to at most n bytes for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (w *Worker) unhold(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[id] != nil {
		w.m.running.Add(context.Background(), -1)
	}
	delete(w.running, id)
}

// emitter stamps an attempt's events with deterministic ids: the same phase
// of the same claim always has the same id, so a retried publish is deduped.
type emitter struct {
	js    jetstream.JetStream
	job   *queue.Job
	epoch uint64
	now   func() time.Time
	red   *redact.Redactor
	m     *workerMetrics

	mu   sync.Mutex
	last time.Time // when the previous phase event was emitted
}

func (e *emitter) Emit(ctx context.Context, typ event.Type, key string, data any) error {
	ev, err := e.event(typ, key, data)
	if err != nil {
		return err
	}
	e.phase(ctx, typ)
	return publishRetry(ctx, e.js, ev)
}

// EmitAll publishes the events without waiting for each acknowledgement
// before the next publish, then waits for them all. If any failed, each is
// published again in turn until acknowledged, its id making that
// idempotent.
func (e *emitter) EmitAll(ctx context.Context, typ event.Type, events []attempt.Keyed) error {
	evs := make([]*event.Event, len(events))
	for i, k := range events {
		ev, err := e.event(typ, k.Key, k.Data)
		if err != nil {
			return err
		}
		evs[i] = ev
	}
	e.phase(ctx, typ)
	b := queue.NewBatch(e.js)
	for _, ev := range evs {
		b.Observed(ctx, ev)
	}
	if b.Wait(ctx) == nil {
		return nil
	}
	for _, ev := range evs {
		if err := publishRetry(ctx, e.js, ev); err != nil {
			return err
		}
	}
	return nil
}

// event is the claim's event of typ: its id the same for the same phase
// (and key) of the same claim.
func (e *emitter) event(typ event.Type, key string, data any) (*event.Event, error) {
	id := drovertype.ClaimEventID(typ, e.job.Attempt, e.epoch)
	if key != "" {
		sum := sha256.Sum256([]byte(key))
		id = drovertype.ClaimEventID(typ, e.job.Attempt, e.epoch, hex.EncodeToString(sum[:8]))
	}
	ev, err := event.New(id, typ, e.now(), e.job.Flow, e.job.Task, e.job.Attempt, e.epoch, data)
	if err != nil {
		return nil, err
	}
	// Secrets are masked in the encoded payload: stderr tails, final text,
	// error messages and diffs alike.
	ev.Data = e.red.Bytes(ev.Data)
	return ev, nil
}

// publishRetry publishes until the server acknowledges or ctx ends; the
// event id makes the retries idempotent.
func publishRetry(ctx context.Context, js jetstream.JetStream, ev *event.Event) error {
	backoff := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := queue.PublishEvent(pctx, js, ev)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker: publish %s: %w (last error: %v)", ev.ID, context.Cause(ctx), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// secrets collects the values of the secret variables the served runtimes
// pass through or set, so they can be masked wherever they appear.
func secrets(cfg *config.Config) *redact.Redactor {
	var names, fixed []string
	for _, name := range cfg.Worker.Runtimes {
		rt := cfg.Runtimes[name]
		for _, n := range rt.Passthrough() {
			if redact.IsSecretName(n) {
				names = append(names, n)
			}
		}
		// The variables a CLI's provider configuration names hold its keys,
		// whatever they are called (as configured when the worker started).
		names = append(names, adapter.HostKeyVariables(rt)...)
		for _, kv := range rt.Env {
			if n, _, _ := strings.Cut(kv, "="); redact.IsSecretName(n) {
				fixed = append(fixed, kv)
			}
		}
	}
	// A native runtime's API key, whatever its variable is called: this
	// process holds it, and any runtime may be a validator.
	for _, rt := range cfg.Runtimes {
		if rt.Adapter == "native" && rt.APIKeyEnv != "" {
			names = append(names, rt.APIKeyEnv)
		}
	}
	// The worker's own NATS secrets: a CLI runs as the worker's user and
	// could find them; they must not leave in its output either.
	fixed = append(fixed, "nats.password="+cfg.NATS.Password.Value(), "nats.token="+cfg.NATS.Token.Value())
	return redact.FromEnv(names, fixed)
}
