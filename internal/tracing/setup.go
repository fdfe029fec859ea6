package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc"
)

// Exporters and protocols.
const (
	ExporterNone = "none"
	ExporterOTLP = "otlp"
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config is the `tracing` section of Drover's configuration. Every field
// left empty defers to the standard OTEL_* variable of the same meaning, so
// a deployment that already sets those needs no Drover keys.
type Config struct {
	// Exporter is "otlp" to export spans or "none" to export nothing; empty
	// follows OTEL_TRACES_EXPORTER (otlp or none). OTEL_SDK_DISABLED=true
	// turns tracing off whatever this says. Defaults to empty: off unless
	// OTEL_TRACES_EXPORTER=otlp.
	Exporter string `mapstructure:"exporter"`
	// Protocol of the OTLP exporter: "grpc" or "http/protobuf"; empty
	// follows OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then
	// OTEL_EXPORTER_OTLP_PROTOCOL. Defaults to http/protobuf.
	Protocol string `mapstructure:"protocol"`
	// Endpoint is the collector's base URL, like OTEL_EXPORTER_OTLP_ENDPOINT:
	// http://collector:4318 for http/protobuf (/v1/traces is appended),
	// http://collector:4317 for grpc; http is plain text, https means TLS.
	// Empty follows OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then
	// OTEL_EXPORTER_OTLP_ENDPOINT. Defaults to the OpenTelemetry
	// specification's, in plain text: http://localhost:4318 for
	// http/protobuf, http://localhost:4317 for grpc.
	Endpoint string `mapstructure:"endpoint"`
	// SampleRatio is the fraction of flows traced, in (0, 1]. It is decided
	// from the flow's trace id, so the controller and every worker trace
	// the same flows. Defaults to 1.
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// ServiceName is the service.name of the process's spans; empty follows
	// OTEL_SERVICE_NAME. Defaults to drover-controller or drover-worker.
	ServiceName string `mapstructure:"service_name"`
	// ShutdownTimeout bounds how long a process that is exiting waits for
	// the collector to take its last spans. Defaults to 2s: enough for a
	// collector that is there, short enough not to hold up a restart when
	// it is not.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// WithDefaults fills the fields whose zero value means a default.
func (c Config) WithDefaults() Config {
	if c.SampleRatio == 0 {
		c.SampleRatio = 1
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = shutdownWait
	}
	return c
}

// Validate names each bad field by its configuration key.
func (c Config) Validate() error {
	var errs []error
	switch c.Exporter {
	case "", ExporterNone, ExporterOTLP:
	default:
		errs = append(errs, fmt.Errorf("tracing.exporter: must be otlp or none (got %q)", c.Exporter))
	}
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		errs = append(errs, fmt.Errorf("tracing.protocol: must be grpc or http/protobuf (got %q)", c.Protocol))
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("tracing.endpoint: must be a URL like http://collector:4318 (got %q)", c.Endpoint))
		}
	}
	if c.SampleRatio <= 0 || c.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("tracing.sample_ratio: must be above 0 and at most 1 (got %g); to trace nothing set tracing.exporter: none", c.SampleRatio))
	}
	if c.ShutdownTimeout < 0 || c.ShutdownTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("tracing.shutdown_timeout: must be 0s to 1m (got %s)", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// settings is what Config and the environment resolve to.
type settings struct {
	on       bool
	why      string // why tracing is off
	protocol string
	// endpoint is where spans go: the full URL of an http/protobuf
	// exporter, the target of a grpc one; from says which key or variable
	// named it, or "default".
	endpoint, from string
	wait           time.Duration // Config.ShutdownTimeout
	// setEndpoint: Drover passes endpoint to the exporter. It does when its
	// own key or the default names it, and leaves an OTEL_* variable to the
	// exporter, which reads it with its companions (OTEL_EXPORTER_OTLP_INSECURE).
	setEndpoint bool
	ratio       float64
	service     string // "" leaves service.name to OTEL_SERVICE_NAME or the process default
}

// The OpenTelemetry specification's default endpoints: plain HTTP/2 or
// HTTP on localhost. The Go exporters' own defaults would use TLS, which a
// local collector or Jaeger does not speak, so Drover names these.
const (
	DefaultHTTPEndpoint = "http://localhost:4318/v1/traces"
	DefaultGRPCEndpoint = "http://localhost:4317"
)

// resolve applies the precedence documented in docs/config.md:
// OTEL_SDK_DISABLED=true first, then each Drover key when set, then its
// OTEL_* variable, then the default.
func (c Config) resolve(getenv func(string) string) (settings, error) {
	c = c.WithDefaults()
	s := settings{ratio: c.SampleRatio, service: c.ServiceName, wait: c.ShutdownTimeout}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		s.why = "OTEL_SDK_DISABLED=true"
		return s, nil
	}
	exporter, from := c.Exporter, "tracing.exporter"
	if exporter == "" {
		exporter, from = strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))), "OTEL_TRACES_EXPORTER"
	}
	switch exporter {
	case "":
		s.why = "neither tracing.exporter nor OTEL_TRACES_EXPORTER is set"
		return s, nil
	case ExporterNone:
		s.why = from + " is none"
		return s, nil
	case ExporterOTLP:
	default:
		return s, fmt.Errorf("tracing: %s=%q: Drover exports spans with otlp only (or none)", from, exporter)
	}
	s.protocol, from = c.Protocol, "tracing.protocol"
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if s.protocol == "" {
			s.protocol, from = strings.TrimSpace(getenv(env)), env
		}
	}
	switch s.protocol {
	case "":
		s.protocol = ProtocolHTTP
	case ProtocolGRPC, ProtocolHTTP:
	default:
		return s, fmt.Errorf("tracing: %s=%q: the protocol must be grpc or http/protobuf", from, s.protocol)
	}
	if err := s.resolveEndpoint(c.Endpoint, getenv); err != nil {
		return s, err
	}
	s.on = true
	return s, nil
}

// resolveEndpoint: tracing.endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (a full URL, used as it is), else OTEL_EXPORTER_OTLP_ENDPOINT (a base
// URL, like tracing.endpoint), else the default for the protocol.
func (s *settings) resolveEndpoint(key string, getenv func(string) string) error {
	if key != "" {
		u, err := signalURL(key, s.protocol)
		if err != nil {
			return fmt.Errorf("tracing: tracing.endpoint: %w", err)
		}
		s.endpoint, s.from, s.setEndpoint = u, "tracing.endpoint", true
		return nil
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		s.endpoint, s.from = v, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		return nil
	}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		s.endpoint, s.from = v, "OTEL_EXPORTER_OTLP_ENDPOINT"
		if u, err := signalURL(v, s.protocol); err == nil {
			s.endpoint = u
		}
		return nil
	}
	s.endpoint, s.from, s.setEndpoint = DefaultHTTPEndpoint, "default", true
	if s.protocol == ProtocolGRPC {
		s.endpoint = DefaultGRPCEndpoint
	}
	return nil
}

// signalURL is where a base URL sends traces: /v1/traces under it for
// http/protobuf; a grpc target is the URL itself.
func signalURL(base, protocol string) (string, error) {
	if protocol != ProtocolHTTP {
		return base, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = path.Join("/", u.Path, "v1/traces")
	return u.String(), nil
}

// Process says which process exports the spans.
type Process struct {
	// Service is the service.name unless configured otherwise:
	// drover-controller or drover-worker.
	Service string
	// Instance is the service.instance.id, one per process: a worker's id
	// (which defaults to host-pid too), else, when empty, DefaultInstance.
	// A process that runs several workers (controller dev) is one instance;
	// its workers' spans tell them apart by drover.worker.id.
	Instance string
}

// DefaultInstance is the service.instance.id of a process that has no id of
// its own (the controller): host-pid, like a worker's default id. It is
// unique among the processes running at once, and readable where a UUID
// would not be; a restarted process is a new instance.
func DefaultInstance() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Provider is the installed tracer provider. A nil *Provider (tracing off)
// is valid: its Shutdown does nothing.
type Provider struct {
	tp       *sdktrace.TracerProvider
	exp      *exporter
	log      *slog.Logger
	endpoint string
	wait     time.Duration // Config.ShutdownTimeout
	once     sync.Once
	err      error
}

// Endpoint is where the provider sends spans (see DefaultHTTPEndpoint).
func (p *Provider) Endpoint() string { return p.endpoint }

// Setup installs an SDK tracer provider exporting over OTLP, and the W3C
// trace context propagator, as the OTel globals, when cfg and the
// environment turn tracing on. Off, it installs nothing and returns nil, nil:
// the globals stay no-ops. Call Shutdown on the result before exiting.
//
// Export failures are logged when they happen, once per cause until an
// export succeeds again (export.go); so are the OTel SDK's other errors.
func Setup(ctx context.Context, cfg Config, p Process, log *slog.Logger) (*Provider, error) {
	s, err := cfg.resolve(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !s.on {
		log.Debug("tracing off", "why", s.why)
		return nil, nil
	}
	return start(ctx, s, p, log, nil)
}

// dialer connects to addr in place of the exporter; tests use one to reach
// a receiver on a free port from the default endpoint.
type dialer func(ctx context.Context, addr string) (net.Conn, error)

func start(ctx context.Context, s settings, p Process, log *slog.Logger, dial dialer) (*Provider, error) {
	exp, err := newExporter(ctx, s, log, dial)
	if err != nil {
		return nil, err
	}
	if p.Instance == "" {
		p.Instance = DefaultInstance()
	}
	res, err := newResource(ctx, s, p)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := NewProvider(s.ratio, sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(exp.log.handle))
	instance, _ := res.Set().Value(semconv.ServiceInstanceIDKey)
	log.Info("tracing on", "protocol", s.protocol, "endpoint", s.endpoint, "endpoint_from", s.from,
		"sample_ratio", s.ratio, "service", serviceName(res), "instance", instance.AsString())
	return &Provider{tp: tp, exp: exp, log: log, endpoint: s.endpoint, wait: s.wait}, nil
}

// NewProvider builds Drover's tracer provider: span ids from IDGenerator,
// and a sampler that decides from the trace id alone (TraceIDRatioBased),
// for root spans and for remote parents alike. Every process then makes the
// same decision for a flow, whether it starts the flow's span or continues
// a context that came in a message. A span started under one of the
// process's own spans takes its drover.flow.id unless it names one
// (inheritFlow). Tests pass their own span processor.
func NewProvider(ratio float64, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	r := sdktrace.TraceIDRatioBased(ratio)
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithIDGenerator(IDGenerator{}),
		sdktrace.WithSampler(sdktrace.ParentBased(r, sdktrace.WithRemoteParentSampled(r))),
		sdktrace.WithSpanProcessor(inheritFlow{}),
	}, opts...)...)
}

func newExporter(ctx context.Context, s settings, log *slog.Logger, dial dialer) (*exporter, error) {
	exp := newLoggingExporter(log, s.endpoint)
	var (
		inner sdktrace.SpanExporter
		err   error
	)
	// Options win over the OTEL_EXPORTER_OTLP_* variables, which the
	// exporters read themselves (endpoint, headers, TLS, timeout,
	// compression): only what Drover's keys and defaults set is passed.
	switch s.protocol {
	case ProtocolGRPC:
		// WithDialOption replaces, not adds: one call with all of them.
		dialOpts := []grpc.DialOption{grpc.WithChainUnaryInterceptor(exp.intercept)}
		if dial != nil {
			dialOpts = append(dialOpts, grpc.WithContextDialer(dial))
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithDialOption(dialOpts...)}
		if s.setEndpoint {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.endpoint))
		}
		inner, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if s.setEndpoint {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.endpoint))
		}
		if dial != nil {
			opts = append(opts, otlptracehttp.WithHTTPClient(&http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
			}}))
		}
		inner, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp %s exporter: %w", s.protocol, err)
	}
	exp.SpanExporter = inner
	return exp, nil
}

// newResource describes the process: service.name (the configured name,
// else OTEL_SERVICE_NAME, else the process's default), service.instance.id,
// host.name, plus OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, s settings, p Process) (*resource.Resource, error) {
	host, _ := os.Hostname()
	base := []attribute.KeyValue{semconv.ServiceName(p.Service), semconv.HostName(host)}
	if p.Instance != "" {
		base = append(base, semconv.ServiceInstanceID(p.Instance))
	}
	opts := []resource.Option{
		resource.WithTelemetrySDK(),
		resource.WithAttributes(base...),
		resource.WithFromEnv(), // later options win: the environment over the defaults above
	}
	if s.service != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(s.service)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value(semconv.ServiceNameKey)
	return v.AsString()
}

// shutdownWait bounds Shutdown: enough for a collector that is there to
// take the last batch (milliseconds), and all a hung one can hold up a
// process's exit. One that refuses ends it at once (exporter.intercept).
const shutdownWait = 2 * time.Second

// Shutdown exports what is buffered and stops exporting, within ctx and at
// most shutdownWait. A collector that refuses, was failing already, or
// does not answer in time loses the spans still queued rather than hold up
// the exit; Shutdown logs how many spans were never exported and why, and
// returns an error only for what it did not log.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.once.Do(func() { p.err = p.shutdown(ctx) })
	return p.err
}

func (p *Provider) shutdown(ctx context.Context) error {
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, p.wait,
		fmt.Errorf("%w: the collector at %s did not take the last spans within %s", errAborted, p.endpoint, p.wait))
	defer cancel()
	p.exp.stopping.Store(true)
	if err := p.exp.log.failing(); err != nil {
		// The export in flight, if any, waits to retry: end it, and send
		// nothing more to a collector that is not answering.
		p.exp.abort(fmt.Errorf("%w: the collector at %s was failing", errAborted, p.endpoint))
	}
	// The processor's last export and the exporter's shutdown run on its
	// own goroutine, which it leaves running when ctx ends first: ending
	// the export at ctx's end lets that goroutine finish too.
	defer context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if !errors.Is(cause, errAborted) { // the caller's ctx ended first
			cause = fmt.Errorf("%w: %w", errAborted, cause)
		}
		p.exp.abort(cause)
	})()
	err := p.tp.Shutdown(ctx)
	select {
	case <-p.exp.stopped:
	case <-time.After(time.Second): // the provider skipped the processor: ctx had ended
	}
	lost, last := p.exp.log.lostSpans()
	waited := time.Since(began).Round(time.Millisecond)
	if lost > 0 {
		p.log.Warn("tracing stopped; spans were not exported", "endpoint", p.endpoint, "lost", lost,
			"last_err", last, "waited", waited, "wait_limit", p.wait)
		return nil
	}
	if err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	p.log.Debug("tracing stopped", "endpoint", p.endpoint, "waited", waited)
	return nil
}
