package worker

import (
	"context"
	"errors"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/telemetry"
)

// workerMetrics are the worker's instruments (see docs/metrics.md); no-op
// unless a meter provider is installed.
type workerMetrics struct {
	running metric.Int64UpDownCounter
	phases  metric.Float64Histogram
	claims  metric.Int64Counter
	output  metric.Int64Counter
	// ignoredSignals counts stop signals that did not decode or named
	// another attempt than their subject's.
	ignoredSignals metric.Int64Counter
}

func newWorkerMetrics() *workerMetrics {
	mt := telemetry.Meter("worker")
	m := &workerMetrics{}
	m.running, _ = mt.Int64UpDownCounter("drover_worker_attempts_running",
		metric.WithDescription("Attempts this process holds and runs."))
	m.phases, _ = mt.Float64Histogram("drover_worker_phase_duration_seconds", metric.WithUnit("s"),
		metric.WithDescription("Time from an attempt's previous phase event to this one, by phase (the event ending it) and runtime."))
	m.claims, _ = mt.Int64Counter("drover_worker_claims_total",
		metric.WithDescription("Claim tries on delivered jobs, by result (claimed|held|finished|error)."))
	m.output, _ = mt.Int64Counter("drover_worker_output_bytes_total",
		metric.WithDescription("Bytes of CLI output read, by runtime."))
	m.ignoredSignals, _ = mt.Int64Counter("drover_worker_cancel_signals_ignored_total",
		metric.WithDescription("Stop signals on drover.control.cancel.* not obeyed: undecodable, or not naming their subject's attempt."))
	return m
}

func (m *workerMetrics) claim(ctx context.Context, result string) {
	m.claims.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	claimResult(ctx, result)
}

// countOutput wraps an output sink to count its bytes.
func (m *workerMetrics) countOutput(runtime string, write func(supervise.Stream, []byte)) func(supervise.Stream, []byte) {
	attrs := metric.WithAttributes(attribute.String("runtime", runtime))
	return func(s supervise.Stream, p []byte) {
		m.output.Add(context.Background(), int64(len(p)), attrs)
		write(s, p)
	}
}

// phase records the time since the attempt's previous phase event.
func (e *emitter) phase(ctx context.Context, typ event.Type) {
	if e.m == nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	prev := e.last
	e.last = now
	e.mu.Unlock()
	if !prev.IsZero() {
		e.m.phases.Record(ctx, now.Sub(prev).Seconds(), metric.WithAttributes(
			attribute.String("phase", string(typ)), attribute.String("runtime", e.job.Runtime)))
	}
}

// addReadyChecks registers the worker's readiness checks for /readyz until
// Stop: NATS connected, a healthy runtime, claim loops started.
func (w *Worker) addReadyChecks() {
	w.rmChecks = append(w.rmChecks,
		telemetry.AddCheck("worker_nats", func(context.Context) error {
			if !w.js.Conn().IsConnected() {
				return errors.New("not connected")
			}
			return nil
		}),
		telemetry.AddCheck("worker_runtimes", func(context.Context) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, h := range w.health {
				if h.Healthy {
					return nil
				}
			}
			return errors.New("no healthy runtime")
		}),
		telemetry.AddCheck("worker_claim_loops", func(context.Context) error {
			if !w.loopsActive.Load() {
				return errors.New("not started")
			}
			return nil
		}),
		telemetry.AddCheck("worker_disk", func(ctx context.Context) error {
			return w.disk.check(ctx)
		}),
		w.addSandboxCheck(),
	)
}
