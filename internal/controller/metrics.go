package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/fleet"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/telemetry"
)

// metrics are the controller's instruments (see docs/metrics.md). They are
// recorded by the live fold loop only, never by the pure fold, so a rebuild
// does not count events twice.
type metrics struct {
	c        *Controller
	folded   metric.Int64Counter
	restarts metric.Int64Counter
	ended    metric.Int64Counter
	duration metric.Float64Histogram
	tokens   metric.Int64Counter
	foldLag  atomic.Uint64 // the fold consumer's pending count after the last message
	observe  func() (metric.Registration, error)
	// Leadership: this controller's role (1 while it leads), the
	// elections its live fold has folded, its lease renewals.
	leader    atomic.Int64
	elections metric.Int64Counter
	renewals  metric.Float64Histogram
}

func newMetrics(c *Controller) *metrics {
	mt := telemetry.Meter("controller")
	m := &metrics{c: c}
	m.folded, _ = mt.Int64Counter("drover_events_folded_total",
		metric.WithDescription("Events folded into the projection by the live fold loop."))
	m.restarts, _ = mt.Int64Counter("drover_fold_consumer_restarts_total",
		metric.WithDescription("Times the fold loop replaced its failed events consumer."))
	m.ended, _ = mt.Int64Counter("drover_attempts_ended_total",
		metric.WithDescription("Attempts ended, by runtime, outcome (succeeded|failed|abandoned|lost) and error class."))
	m.duration, _ = mt.Float64Histogram("drover_attempt_duration_seconds", metric.WithUnit("s"),
		metric.WithDescription("Reported attempt run time, by runtime and outcome."))
	m.tokens, _ = mt.Int64Counter("drover_tokens_total",
		metric.WithDescription("Tokens reported by attempts, by runtime, model and direction (input|output|cache_read|cache_write)."))
	m.elections, _ = mt.Int64Counter("drover_leader_elections_total",
		metric.WithDescription("Leader elections (leader_elected events) folded by the live fold loop: leadership changes."))
	m.renewals, _ = mt.Float64Histogram("drover_leader_lease_renew_seconds", metric.WithUnit("s"),
		metric.WithDescription("Time the leader's lease renewals took, by result (ok|failed)."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
	leader, _ := mt.Int64ObservableGauge("drover_controller_leader",
		metric.WithDescription("1 while this controller leads, 0 while it stands by."))
	epoch, _ := mt.Int64ObservableGauge("drover_leader_epoch",
		metric.WithDescription("The latest leader epoch this controller has folded."))
	lag, _ := mt.Int64ObservableGauge("drover_fold_lag_events",
		metric.WithDescription("Events in the EVENTS stream not yet folded (stream last sequence minus applied)."))
	qlag, _ := mt.Int64ObservableGauge("drover_queue_lag_jobs",
		metric.WithDescription("Attempt jobs queued or delivered but not acknowledged, by runtime."))
	workers, _ := mt.Int64ObservableGauge("drover_workers",
		metric.WithDescription("Registered workers serving each runtime, by runtime and health (healthy|unhealthy)."))
	cool := cooldownGauges{}
	cool.remaining, _ = mt.Float64ObservableGauge("drover_runtime_cooldown_remaining_seconds", metric.WithUnit("s"),
		metric.WithDescription("Seconds until the cooldowns holding back each configured runtime end (its own, or its credential's); 0 when none holds it back or they have ended."))
	cool.state, _ = mt.Int64ObservableGauge("drover_runtime_cooldown",
		metric.WithDescription("1 while a cooldown holds back the runtime, by state: cooling (nothing starts), half_open (one probe goes first); 0 otherwise."))
	// The gauges read on scrape are observed only while Run runs.
	m.observe = func() (metric.Registration, error) {
		return mt.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
			o.ObserveInt64(lag, int64(m.foldLag.Load()))
			o.ObserveInt64(leader, m.leader.Load())
			var e uint64
			m.c.store.Read(func(st *projection.State) { e = st.LeaderEpoch() })
			o.ObserveInt64(epoch, int64(e))
			m.observeCooldowns(o, cool)
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			m.observeQueue(ctx, o, qlag)
			m.observeWorkers(ctx, o, workers)
			return nil
		}, lag, qlag, workers, cool.remaining, cool.state, leader, epoch)
	}
	return m
}

// recordFolded counts one newly folded event and, for attempt endings,
// records outcome, duration and tokens from the attempt the fold just ended:
// the report is read from the projection, not decoded again.
func (m *metrics) recordFolded(ctx context.Context, seq uint64, ev *event.Event) {
	m.folded.Add(ctx, 1)
	if ev.Type == event.LeaderElected {
		var folded bool
		m.c.store.Read(func(st *projection.State) { folded = st.Seen[ev.ID] == seq })
		if folded {
			m.elections.Add(ctx, 1)
		}
		return
	}
	if ev.Type != event.AttemptReported && ev.Type != event.AttemptAbandoned && ev.Type != event.AttemptLost {
		return
	}
	var (
		runtime string
		rep     event.Report
		counted bool
	)
	m.c.store.Read(func(st *projection.State) {
		a := st.Attempts[ev.Attempt]
		// Only an event that ended the attempt counts: not a duplicate, not
		// a report fenced off from a superseded claim.
		if st.Seen[ev.ID] != seq || a == nil || a.Phase != ev.Type || !a.State.Terminal() {
			return
		}
		runtime, counted = a.Runtime, true
		if ev.Type == event.AttemptReported && a.Report != nil {
			rep = *a.Report
		}
	})
	if !counted {
		return
	}
	rt := attribute.String("runtime", runtime)
	switch ev.Type {
	case event.AttemptAbandoned:
		m.ended.Add(ctx, 1, metric.WithAttributes(rt, attribute.String("outcome", "abandoned"), attribute.String("class", "")))
		return
	case event.AttemptLost:
		m.ended.Add(ctx, 1, metric.WithAttributes(rt, attribute.String("outcome", "lost"), attribute.String("class", string(drovertype.ClassWorkerLost))))
		return
	}
	outcome, class := "succeeded", ""
	if !rep.Success {
		outcome = "failed"
		if rep.Error != nil {
			class = string(rep.Error.Class)
		}
	}
	out := attribute.String("outcome", outcome)
	m.ended.Add(ctx, 1, metric.WithAttributes(rt, out, attribute.String("class", class)))
	m.duration.Record(ctx, float64(rep.DurationMS)/1000, metric.WithAttributes(rt, out))
	if u := rep.Usage; u != nil {
		model := attribute.String("model", u.Model)
		// A count the CLI did not report adds nothing: unknown is not 0.
		for dir, n := range map[string]*int64{"input": u.InputTokens, "output": u.OutputTokens,
			"cache_read": u.CacheReadTokens, "cache_write": u.CacheWriteTokens} {
			if n != nil && *n > 0 {
				m.tokens.Add(ctx, *n, metric.WithAttributes(rt, model, attribute.String("direction", dir)))
			}
		}
	}
}

// cooldownGauges are the instruments of the runtimes' cooldowns.
type cooldownGauges struct {
	remaining metric.Float64Observable
	state     metric.Int64Observable
}

// observeCooldowns reports, for each configured runtime (the label's values
// are bounded by the configuration), the cooldowns holding it back. A
// model's cooldown holds back attempts asking for that model, not a
// runtime, and shows in status only.
func (m *metrics) observeCooldowns(o metric.Observer, g cooldownGauges) {
	now := m.c.now()
	type row struct {
		remaining         float64
		cooling, halfOpen int64
	}
	rows := map[string]*row{}
	m.c.store.Read(func(st *projection.State) {
		for name := range m.c.cfg.Runtimes {
			r := &row{}
			for _, c := range st.CooldownsFor(name, "") {
				if c.Cooling(now) {
					r.cooling = 1
					r.remaining = max(r.remaining, c.Until.Sub(now).Seconds())
				} else {
					r.halfOpen = 1
				}
			}
			if r.cooling == 1 {
				r.halfOpen = 0
			}
			rows[name] = r
		}
	})
	for name, r := range rows {
		rt := attribute.String("runtime", name)
		o.ObserveFloat64(g.remaining, r.remaining, metric.WithAttributes(rt))
		o.ObserveInt64(g.state, r.cooling, metric.WithAttributes(rt, attribute.String("state", CooldownCooling)))
		o.ObserveInt64(g.state, r.halfOpen, metric.WithAttributes(rt, attribute.String("state", CooldownHalfOpen)))
	}
}

// observeQueue sums each attempts consumer's pending and unacknowledged
// jobs by runtime (the last token of its filter subject).
func (m *metrics) observeQueue(ctx context.Context, o metric.Observer, g metric.Int64Observable) {
	st, err := m.c.js.Stream(ctx, queue.AttemptsStream)
	if err != nil {
		return
	}
	byRuntime := map[string]int64{}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		subj := info.Config.FilterSubject
		rt := subj[strings.LastIndexByte(subj, '.')+1:]
		byRuntime[rt] += int64(info.NumPending) + int64(info.NumAckPending)
	}
	for rt, n := range byRuntime {
		o.ObserveInt64(g, n, metric.WithAttributes(attribute.String("runtime", rt)))
	}
}

func (m *metrics) observeWorkers(ctx context.Context, o metric.Observer, g metric.Int64Observable) {
	regs, err := fleet.Workers(ctx, m.c.js)
	if err != nil {
		return
	}
	type key struct{ runtime, health string }
	counts := map[key]int64{}
	for _, r := range regs {
		for _, h := range r.Runtimes {
			k := key{h.Name, "unhealthy"}
			if h.Healthy {
				k.health = "healthy"
			}
			counts[k]++
		}
	}
	for k, n := range counts {
		o.ObserveInt64(g, n, metric.WithAttributes(attribute.String("runtime", k.runtime), attribute.String("health", k.health)))
	}
}

// readyLag is how many events of the log a controller may have left to
// fold and still be ready: about one fold batch, a fraction of a second.
const readyLag = 4096

// addReadyChecks registers the controller's readiness checks for /readyz
// while Run is running; the returned func removes them.
func (c *Controller) addReadyChecks() func() {
	rms := []func(){
		telemetry.AddCheck("nats", func(context.Context) error {
			if nc := c.js.Conn(); nc == nil || !nc.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		}),
		telemetry.AddCheck("store", func(context.Context) error {
			c.store.Read(func(st *projection.State) { _ = len(st.Flows) })
			return nil
		}),
		telemetry.AddCheck("events_stream", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := c.js.Stream(ctx, queue.EventsStream)
			return err
		}),
		// Leader or standby alike: a controller is ready once its
		// projection has caught up with the log, so a rolling update
		// takes the next one down only when this one could take over.
		telemetry.AddCheck("caught_up", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			last, err := c.streamLast(ctx)
			if err != nil {
				return err
			}
			if applied := c.store.Applied(); last > applied+readyLag {
				return fmt.Errorf("%d events of the log not folded yet", last-applied)
			}
			return nil
		}),
	}
	return func() {
		for _, rm := range rms {
			rm()
		}
	}
}

// renewed records one of the leader's lease renewals.
func (m *metrics) renewed(took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.renewals.Record(context.Background(), took.Seconds(), metric.WithAttributes(attribute.String("result", result)))
}
