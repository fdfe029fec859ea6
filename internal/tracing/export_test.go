package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

// logRecorder keeps what is logged and signals each record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
	ch   chan struct{}
}

func newLogRecorder() (*logRecorder, *slog.Logger) {
	r := &logRecorder{ch: make(chan struct{}, 1)}
	return r, slog.New(r)
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
	return nil
}

// with returns the records whose message starts with msg.
func (r *logRecorder) with(msg string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if strings.HasPrefix(rec.Message, msg) {
			out = append(out, rec)
		}
	}
	return out
}

// wait waits until a record starting with msg is logged.
func (r *logRecorder) wait(t *testing.T, msg string) slog.Record {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if recs := r.with(msg); len(recs) > 0 {
			return recs[0]
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("nothing logged as %q; logged: %s", msg, r)
		}
	}
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.recs {
		fmt.Fprintf(&b, "\n  %s %s", rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
	}
	return b.String()
}

func attrOf(rec slog.Record, key string) string {
	var v string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// startFor resolves cfg with no OTEL_* variables and starts a provider
// logging to a recorder; dial, if set, stands in for the exporter's.
func startFor(t *testing.T, cfg Config, dial dialer) (*Provider, *logRecorder) {
	t.Helper()
	s, err := cfg.resolve(func(string) string { return "" })
	if err != nil || !s.on {
		t.Fatalf("resolve: %+v, %v", s, err)
	}
	logs, log := newLogRecorder()
	p, err := start(context.Background(), s, Process{Service: "drover-test"}, log, dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resetGlobals)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, logs
}

// redirect dials the receiver whatever the exporter asks for, and records
// what that was.
func redirect(rcv *tracingtest.Receiver, asked *atomic.Value) dialer {
	to := strings.TrimPrefix(rcv.URL(), "http://")
	return func(ctx context.Context, addr string) (net.Conn, error) {
		asked.Store(addr)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to)
	}
}

// TestDefaultEndpoints: with no endpoint anywhere, spans go to the
// specification's default, localhost:4318 (OTLP/HTTP, /v1/traces) or
// localhost:4317 (OTLP/gRPC), in plain text. The receiver cannot listen on
// those ports in parallel tests, so the exporter's dialing is pointed at
// it: what the exporter asked to dial, and that a plain-text receiver got
// the span, are the exporter's own doing. The same with an https endpoint
// gets nothing through, which shows the check can fail.
func TestDefaultEndpoints(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		receiver func(testing.TB) *tracingtest.Receiver
		endpoint string
		addr     string
	}{
		{ProtocolHTTP, tracingtest.NewHTTP, DefaultHTTPEndpoint, "localhost:4318"},
		{ProtocolGRPC, tracingtest.NewGRPC, DefaultGRPCEndpoint, "localhost:4317"},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			rcv := tc.receiver(t)
			var asked atomic.Value
			p, logs := startFor(t, Config{Exporter: "otlp", Protocol: tc.protocol}, redirect(rcv, &asked))
			if p.Endpoint() != tc.endpoint {
				t.Errorf("endpoint %q, want %q", p.Endpoint(), tc.endpoint)
			}
			on := logs.wait(t, "tracing on")
			if attrOf(on, "endpoint") != tc.endpoint || attrOf(on, "endpoint_from") != "default" {
				t.Errorf("logged %s", logs)
			}
			exportOne(t, p)
			if spans := rcv.Spans(); len(spans) != 1 || spans[0].Name != "probe" {
				t.Fatalf("received %+v; logged %s", spans, logs)
			}
			// gRPC resolves the name before it dials.
			got, _ := asked.Load().(string)
			if host, port, _ := net.SplitHostPort(got); (host != "localhost" && !net.ParseIP(host).IsLoopback()) ||
				port != tc.addr[len("localhost:"):] {
				t.Errorf("the exporter dialed %q, want %q", got, tc.addr)
			}
			if len(logs.with("tracing: export")) > 0 {
				t.Errorf("export failures logged: %s", logs)
			}
		})
		t.Run(tc.protocol+" over TLS gets nothing through", func(t *testing.T) {
			rcv := tc.receiver(t)
			var asked atomic.Value
			tls := "https://" + tc.addr
			p, logs := startFor(t, Config{Exporter: "otlp", Protocol: tc.protocol, Endpoint: tls}, redirect(rcv, &asked))
			_, span := Tracer().Start(context.Background(), "probe")
			span.End()
			flushed := make(chan error, 1)
			go func() { flushed <- p.tp.ForceFlush(context.Background()) }()
			logs.wait(t, "tracing: exporting spans failed")
			if len(rcv.Spans()) != 0 {
				t.Errorf("received %d spans in TLS", len(rcv.Spans()))
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-flushed; err == nil {
				t.Error("an export in TLS to a plain-text receiver worked")
			}
		})
	}
}

// TestFailuresLoggedOncePerCause: a collector that rejects batch after
// batch for one reason is logged once; a new reason once more; an export
// that works says so and forgets, so the first reason, back, is logged
// again. Every rejected span is counted, and Shutdown, facing a collector
// that was failing, says how many were lost without trying again.
func TestFailuresLoggedOncePerCause(t *testing.T) {
	var answer atomic.Value // "ok" or the body of a 400
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := answer.Load().(string); a != "ok" {
			http.Error(w, a, http.StatusBadRequest)
			return
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	p, logs := startFor(t, Config{Exporter: "otlp", Endpoint: srv.URL}, nil)
	batch := func(a string) error {
		answer.Store(a)
		_, span := Tracer().Start(context.Background(), "probe")
		span.End()
		return p.tp.ForceFlush(context.Background())
	}
	const failed, again = "tracing: exporting spans failed", "tracing: exporting spans again"
	for i := range 3 {
		if err := batch("bad batch 1234"); err == nil {
			t.Fatalf("batch %d: no error", i)
		}
	}
	if n := len(logs.with(failed)); n != 1 {
		t.Fatalf("one cause, three batches: logged %d times, want once: %s", n, logs)
	}
	if r := logs.with(failed)[0]; attrOf(r, "endpoint") != srv.URL+"/v1/traces" || !strings.Contains(attrOf(r, "err"), "bad batch") {
		t.Errorf("the failure does not name the endpoint and the cause: %s", logs)
	}
	_ = batch("quota exceeded")
	_ = batch("bad batch 99") // the same reason, another number
	if n := len(logs.with(failed)); n != 2 {
		t.Fatalf("two causes: logged %d times, want twice: %s", n, logs)
	}
	if err := batch("ok"); err != nil {
		t.Fatal(err)
	}
	if rs := logs.with(again); len(rs) != 1 || attrOf(rs[0], "lost_so_far") != "5" {
		t.Fatalf("recovery: %s", logs)
	}
	_ = batch("bad batch 1234")
	if n := len(logs.with(failed)); n != 3 {
		t.Fatalf("a cause back after a recovery: logged %d times in all, want 3: %s", n, logs)
	}
	// Shutdown does not try a collector that was failing, and says so.
	_, span := Tracer().Start(context.Background(), "queued")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := logs.with("tracing stopped")
	if len(stopped) != 1 || attrOf(stopped[0], "lost") != "7" || !strings.Contains(attrOf(stopped[0], "last_err"), "was failing") {
		t.Errorf("shutdown: %s", logs)
	}
}

// deadEndpoint is a loopback address nothing listens on: connections to
// it are refused.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// TestUnreachableCollector: nothing listens at the endpoint. The failure is
// logged with the endpoint at the first attempt — over gRPC while the
// exporter still waits to retry, not when it gives up — once however many
// batches fail, and Shutdown returns as soon as the collector refuses
// rather than at its deadline, saying how many spans were lost.
func TestUnreachableCollector(t *testing.T) {
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			dead := deadEndpoint(t)
			p, logs := startFor(t, Config{Exporter: "otlp", Protocol: protocol, Endpoint: dead}, nil)
			flushed := make(chan error, 1)
			_, span := Tracer().Start(context.Background(), "probe")
			span.End()
			go func() { flushed <- p.tp.ForceFlush(context.Background()) }()
			r := logs.wait(t, "tracing: exporting spans failed")
			if !strings.HasPrefix(attrOf(r, "endpoint"), dead) || !strings.Contains(attrOf(r, "err"), "connection refused") {
				t.Errorf("logged %s", logs)
			}
			if protocol == ProtocolHTTP {
				// Refused is not retried: the export has failed, and so
				// do the next ones.
				if err := <-flushed; err == nil {
					t.Fatal("an export to nothing worked")
				}
				for range 2 {
					_, span := Tracer().Start(context.Background(), "probe")
					span.End()
					if err := p.tp.ForceFlush(context.Background()); err == nil {
						t.Fatal("an export to nothing worked")
					}
				}
			} else {
				// The export waits to retry (5 s); two more spans queue
				// behind it.
				select {
				case err := <-flushed:
					t.Fatalf("the export ended (%v) before its failure was logged", err)
				default:
				}
				for range 2 {
					_, span := Tracer().Start(context.Background(), "probe")
					span.End()
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("Shutdown waited until its deadline")
			}
			if protocol == ProtocolGRPC {
				if err := <-flushed; err == nil {
					t.Error("a flush to nothing worked")
				}
			}
			if n := len(logs.with("tracing: exporting spans failed")); n != 1 {
				t.Errorf("one cause logged %d times: %s", n, logs)
			}
			if n := len(logs.with("tracing: OpenTelemetry error")); n != 0 {
				t.Errorf("the processor's copy of the export error logged again: %s", logs)
			}
			stopped := logs.with("tracing stopped")
			if len(stopped) != 1 || attrOf(stopped[0], "lost") != "3" {
				t.Errorf("shutdown: %s", logs)
			}
		})
	}
}

// TestShutdownBoundedWhenCollectorHangs: a collector that accepts
// connections and never answers holds Shutdown no longer than its bound,
// which the log names, and leaves no exporter goroutine behind (goleak).
func TestShutdownBoundedWhenCollectorHangs(t *testing.T) {
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var held sync.WaitGroup
			conns := make(chan net.Conn, 16)
			held.Go(func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns <- c
				}
			})
			t.Cleanup(func() {
				_ = ln.Close()
				held.Wait()
				close(conns)
				for c := range conns {
					_ = c.Close()
				}
			})
			p, logs := startFor(t, Config{Exporter: "otlp", Protocol: protocol, Endpoint: "http://" + ln.Addr().String(),
				ShutdownTimeout: 200 * time.Millisecond}, nil)
			_, span := Tracer().Start(context.Background(), "probe")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("Shutdown waited until its caller's deadline, not its own bound")
			}
			stopped := logs.with("tracing stopped")
			if len(stopped) != 1 || attrOf(stopped[0], "lost") != "1" || attrOf(stopped[0], "wait_limit") != "200ms" ||
				!strings.Contains(attrOf(stopped[0], "last_err"), "within 200ms") {
				t.Errorf("shutdown: %s", logs)
			}
		})
	}
}

// TestCause: one failure, however wrapped, has one cause; different
// failures have different ones.
func TestCause(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	attempt := fmt.Errorf("Post \"http://127.0.0.1:4318/v1/traces\": %w", refused)
	same := []error{
		attempt,
		fmt.Errorf("traces export: %w", fmt.Errorf("%w: %w", context.DeadlineExceeded, attempt)),
		errors.Join(attempt),
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")},
	}
	for _, err := range same[1:] {
		if cause(err) != cause(same[0]) {
			t.Errorf("%q: cause %q, want %q", err, cause(err), cause(same[0]))
		}
	}
	if cause(errors.New("failed to send: 404 Not Found (body: x)")) == cause(errors.New("failed to send: 400 Bad Request (body: x)")) {
		t.Error("two statuses share a cause")
	}
	if cause(fmt.Errorf("%d spans rejected", 3)) != cause(fmt.Errorf("%d spans rejected", 12)) {
		t.Error("a count makes a new cause")
	}
}
