package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
)

// exporter is the OTLP exporter with what an operator needs around it:
// failures logged when they happen, once per cause (exportLog); a count of
// the spans it never delivered; and a way to end an export at once, which
// Shutdown uses so that a collector that is not there does not hold up a
// process's exit.
type exporter struct {
	sdktrace.SpanExporter
	log *exportLog

	// aborted ends every export in flight, and any later one, with its cause.
	aborted context.Context
	abort   context.CancelCauseFunc
	// stopping: Shutdown has begun, so the next failed attempt ends the
	// export instead of waiting to retry it.
	stopping atomic.Bool
	// stopped is closed once the wrapped exporter has shut down.
	stopped  chan struct{}
	stopOnce sync.Once
}

func newLoggingExporter(log *slog.Logger, endpoint string) *exporter {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &exporter{
		log:     &exportLog{log: log, endpoint: endpoint, causes: map[string]struct{}{}},
		aborted: ctx, abort: cancel, stopped: make(chan struct{}),
	}
}

// ExportSpans exports one batch, ending early if the exporter is aborted.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.aborted.Err() != nil {
		err := context.Cause(e.aborted)
		e.log.dropped(err, len(spans))
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.aborted, func() { cancel(context.Cause(e.aborted)) })()
	err := e.SpanExporter.ExportSpans(ctx, spans)
	switch {
	case err == nil:
		e.log.exported()
	case e.aborted.Err() != nil:
		// Shutdown ended it, and sums up what was lost.
		if !errors.Is(err, errAborted) {
			err = fmt.Errorf("%w: %w", context.Cause(e.aborted), err)
		}
		e.log.dropped(err, len(spans))
	default:
		e.log.failed(err, len(spans))
	}
	return err
}

// Shutdown shuts the wrapped exporter down (the batch processor calls it
// last) and says so.
func (e *exporter) Shutdown(ctx context.Context) error {
	defer e.stopOnce.Do(func() { close(e.stopped) })
	return e.SpanExporter.Shutdown(ctx)
}

// intercept sees every attempt of an OTLP/gRPC export. The exporter retries
// a failed attempt with backoff for as long as its timeout allows (10 s by
// default), and only then returns the error; the first failure is logged
// here, when it happens. At shutdown there is no time to retry: a failed
// attempt ends the export.
//
// OTLP/HTTP has no such hook that keeps the exporter's TLS settings; its
// connection errors (refused, unknown host, TLS) are not retried, and come
// back from the export at once.
func (e *exporter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil || e.aborted.Err() != nil {
		return err
	}
	e.log.attemptFailed(err)
	if e.stopping.Load() {
		e.abort(fmt.Errorf("%w: the collector at %s failed: %w", errAborted, e.log.endpoint, err))
	}
	return err
}

// errAborted is the cause of every export Shutdown ends.
var errAborted = errors.New("tracing: export ended at shutdown")

// exportLog logs export failures once per cause: the first time a cause is
// seen, and again only after an export has succeeded since. A collector
// that is down logs one line, not one per batch every few seconds.
type exportLog struct {
	log      *slog.Logger
	endpoint string

	mu     sync.Mutex
	causes map[string]struct{} // logged since the last export that succeeded
	lost   int                 // spans whose export failed
	last   error
	// fail is the last export failure since the last export that worked.
	fail error
}

// attemptFailed logs an attempt's failure if its cause is new.
func (l *exportLog) attemptFailed(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
	if l.note(err) {
		l.log.Warn("tracing: exporting spans failed; retrying", "endpoint", l.endpoint, "err", err)
	}
}

// failed logs a failed export if its cause is new, and counts its spans
// as lost: the batch processor does not try a batch again.
func (l *exportLog) failed(err error, spans int) {
	l.mu.Lock()
	l.lost += spans
	l.fail = err
	l.mu.Unlock()
	if l.note(err) {
		l.log.Warn("tracing: exporting spans failed; spans dropped", "endpoint", l.endpoint, "spans", spans, "err", err)
	}
}

// dropped counts spans Shutdown gave up on; it logs them itself.
func (l *exportLog) dropped(err error, spans int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost += spans
	l.last = err
}

// handle is the OTel error handler (otel.SetErrorHandler): the batch
// processor hands it the export errors failed has seen already; anything
// else the SDK reports is logged once per cause too.
func (l *exportLog) handle(err error) {
	if errors.Is(err, errAborted) {
		return // Shutdown's doing, which it logs
	}
	if l.note(err) {
		l.log.Warn("tracing: OpenTelemetry error", "endpoint", l.endpoint, "err", err)
	}
}

// exported records an export that worked: the causes seen are forgotten,
// and if any was logged, so is the recovery.
func (l *exportLog) exported() {
	l.mu.Lock()
	recovered := l.fail != nil
	clear(l.causes)
	l.fail = nil
	lost := l.lost
	l.mu.Unlock()
	if recovered {
		l.log.Info("tracing: exporting spans again", "endpoint", l.endpoint, "lost_so_far", lost)
	}
}

// note records err's cause and reports whether it is new.
func (l *exportLog) note(err error) bool {
	key := cause(err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = err
	if _, seen := l.causes[key]; seen {
		return false
	}
	l.causes[key] = struct{}{}
	return true
}

// failing is the last export failure, unless an export worked since.
func (l *exportLog) failing() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fail
}

// lostSpans is how many spans were never exported, and the last error.
func (l *exportLog) lostSpans() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.last
}

var digits = regexp.MustCompile(`[0-9]+`)

// cause names what went wrong, the same for one failure however it was
// wrapped: an attempt's error, the export's ("traces export: context
// deadline exceeded: " + the last attempt's), the batch processor's. It
// follows a chain while each error only puts words in front of the one it
// wraps, and into the last of joined errors (the retrier joins its
// deadline with the last attempt's error, in that order); the first error
// that says more than its cause, or has none, is the cause. Numbers are
// left out (ports, counts, sizes).
func cause(err error) string {
	for err != nil {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[len(errs)-1]
			}
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		}
		if next == nil || !strings.HasSuffix(err.Error(), next.Error()) {
			break
		}
		err = next
	}
	if err == nil {
		return ""
	}
	return digits.ReplaceAllString(err.Error(), "#")
}

var _ sdktrace.SpanExporter = (*exporter)(nil)
