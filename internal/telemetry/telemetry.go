package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Meter returns the named meter of the global provider.
func Meter(name string) metric.Meter { return otel.Meter("github.com/drover-dev/drover/" + name) }

// CheckFunc is one readiness check; a nil error means ready.
type CheckFunc func(ctx context.Context) error

var (
	checksMu sync.Mutex
	checks   = map[string]CheckFunc{}
)

// AddCheck registers a named readiness check served by /readyz, replacing one
// of the same name. The returned func removes it.
func AddCheck(name string, fn CheckFunc) (remove func()) {
	checksMu.Lock()
	defer checksMu.Unlock()
	checks[name] = fn
	return func() {
		checksMu.Lock()
		defer checksMu.Unlock()
		delete(checks, name)
	}
}

// Server serves /metrics, /healthz and /readyz. A nil *Server is a valid,
// disabled server.
type Server struct {
	srv *http.Server
	ln  net.Listener
	mp  *sdkmetric.MeterProvider
	log *slog.Logger

	mu     sync.RWMutex
	mounts map[string]*mounted // by path prefix (Mount)
}

// Option changes what Start serves.
type Option func(*options)

type options struct{ pprof bool }

// WithPprof also serves Go's profiler (net/http/pprof) under /debug/pprof/
// when on: CPU and heap profiles of the live process, to find what limits
// it. Off unless asked for (config http.pprof), since it exposes stacks and
// memory to whoever reaches the listener.
func WithPprof(on bool) Option { return func(o *options) { o.pprof = on } }

// Start installs the Prometheus-exporting meter provider as the global one
// and serves on listen (host:port). An empty listen returns nil, nil: off.
func Start(listen string, log *slog.Logger, opts ...Option) (*Server, error) {
	if listen == "" {
		return nil, nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(durationView))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, fmt.Errorf("telemetry: listen %s: %w", listen, err)
	}
	otel.SetMeterProvider(mp)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", readyz)
	if o.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, mp: mp, log: log,
		mounts: map[string]*mounted{}}
	mux.HandleFunc("/", s.serveMounted)
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("telemetry server", "err", err)
		}
	}()
	if log != nil {
		log.Info("serving metrics and health", "addr", ln.Addr().String())
	}
	return s, nil
}

// durationView gives *_seconds histograms buckets suited to attempts and
// phases (seconds to an hour) rather than the SDK's millisecond defaults.
func durationView(inst sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if inst.Kind != sdkmetric.InstrumentKindHistogram || inst.Unit != "s" {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{
		Name: inst.Name, Description: inst.Description, Unit: inst.Unit,
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		},
	}, true
}

// readyz runs every registered check with a 3s budget: 200 with "ok <name>"
// lines when all pass, else 503 listing the failing ones. No checks yet
// means still starting: 503.
func readyz(w http.ResponseWriter, r *http.Request) {
	checksMu.Lock()
	names := make([]string, 0, len(checks))
	fns := make(map[string]CheckFunc, len(checks))
	for n, fn := range checks {
		names = append(names, n)
		fns[n] = fn
	}
	checksMu.Unlock()
	sort.Strings(names)
	if len(names) == 0 {
		http.Error(w, "not ready: starting (no checks registered)", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var b strings.Builder
	failed := false
	for _, n := range names {
		if err := fns[n](ctx); err != nil {
			failed = true
			fmt.Fprintf(&b, "fail %s: %v\n", n, err)
		} else {
			fmt.Fprintf(&b, "ok %s\n", n)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(b.String()))
}

// Mount serves h for every path under prefix (which ends in "/") on the
// same listener, until the returned func unmounts it: what another
// component serves there (the controller's console) lives no longer than
// that component.
func (s *Server) Mount(prefix string, h http.Handler) (unmount func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &mounted{h}
	s.mounts[prefix] = m
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mounts[prefix] == m {
			delete(s.mounts, prefix)
		}
	}
}

// mounted is one Mount, compared by identity (handlers may not compare).
type mounted struct{ h http.Handler }

func (s *Server) serveMounted(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	var h http.Handler
	best := ""
	for p, m := range s.mounts {
		if strings.HasPrefix(r.URL.Path, p) && len(p) > len(best) {
			h, best = m.h, p
		}
	}
	s.mu.RUnlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h.ServeHTTP(w, r)
}

// Addr is the address served, or "" when off.
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops serving, waiting up to ctx for in-flight scrapes, and
// shuts the meter provider down.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return errors.Join(s.srv.Shutdown(ctx), s.mp.Shutdown(ctx))
}
