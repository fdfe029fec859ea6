package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
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
	// http://collector:4317 for grpc; https means TLS. Empty follows
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT.
	// Defaults to the exporter's own, localhost:4318 or localhost:4317.
	Endpoint string `mapstructure:"endpoint"`
	// SampleRatio is the fraction of flows traced, in (0, 1]. It is decided
	// from the flow's trace id, so the controller and every worker trace
	// the same flows. Defaults to 1.
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// ServiceName is the service.name of the process's spans; empty follows
	// OTEL_SERVICE_NAME. Defaults to drover-controller or drover-worker.
	ServiceName string `mapstructure:"service_name"`
}

// WithDefaults fills the fields whose zero value means a default.
func (c Config) WithDefaults() Config {
	if c.SampleRatio == 0 {
		c.SampleRatio = 1
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
	return errors.Join(errs...)
}

// settings is what Config and the environment resolve to.
type settings struct {
	on       bool
	why      string // why tracing is off
	protocol string
	endpoint string // a collector URL for the exporter option; "" leaves it to OTEL_* or the default
	ratio    float64
	service  string // "" leaves service.name to OTEL_SERVICE_NAME or the process default
}

// resolve applies the precedence documented in docs/config.md:
// OTEL_SDK_DISABLED=true first, then each Drover key when set, then its
// OTEL_* variable, then the default.
func (c Config) resolve(getenv func(string) string) (settings, error) {
	c = c.WithDefaults()
	s := settings{ratio: c.SampleRatio, endpoint: c.Endpoint, service: c.ServiceName}
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
	if s.endpoint != "" && s.protocol == ProtocolHTTP {
		// Like OTEL_EXPORTER_OTLP_ENDPOINT, the key is a base URL.
		u, err := url.Parse(s.endpoint)
		if err != nil {
			return s, fmt.Errorf("tracing: tracing.endpoint: %w", err)
		}
		u.Path = path.Join("/", u.Path, "v1/traces")
		s.endpoint = u.String()
	}
	s.on = true
	return s, nil
}

// Process says which process exports the spans.
type Process struct {
	// Service is the service.name unless configured otherwise:
	// drover-controller or drover-worker.
	Service string
	// Instance is the service.instance.id: the worker id, or the host.
	Instance string
}

// Provider is the installed tracer provider. A nil *Provider (tracing off)
// is valid: its Shutdown does nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Setup installs an SDK tracer provider exporting over OTLP, and the W3C
// trace context propagator, as the OTel globals, when cfg and the
// environment turn tracing on. Off, it installs nothing and returns nil, nil:
// the globals stay no-ops. Call Shutdown on the result before exiting.
func Setup(ctx context.Context, cfg Config, p Process, log *slog.Logger) (*Provider, error) {
	s, err := cfg.resolve(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !s.on {
		log.Debug("tracing off", "why", s.why)
		return nil, nil
	}
	exp, err := newExporter(ctx, s)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, s, p)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := NewProvider(s.ratio, sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	endpoint := s.endpoint
	if endpoint == "" {
		endpoint = "from OTEL_EXPORTER_OTLP_* or the default"
	}
	log.Info("tracing on", "protocol", s.protocol, "endpoint", endpoint, "sample_ratio", s.ratio,
		"service", serviceName(res))
	return &Provider{tp: tp}, nil
}

// NewProvider builds Drover's tracer provider: span ids from IDGenerator,
// and a sampler that decides from the trace id alone (TraceIDRatioBased),
// for root spans and for remote parents alike. Every process then makes the
// same decision for a flow, whether it starts the flow's span or continues
// a context that came in a message. Tests pass their own span processor.
func NewProvider(ratio float64, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	r := sdktrace.TraceIDRatioBased(ratio)
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithIDGenerator(IDGenerator{}),
		sdktrace.WithSampler(sdktrace.ParentBased(r, sdktrace.WithRemoteParentSampled(r))),
	}, opts...)...)
}

func newExporter(ctx context.Context, s settings) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// Options win over the OTEL_EXPORTER_OTLP_* variables, which the
	// exporters read themselves (endpoint, headers, TLS, timeout,
	// compression): only what Drover's keys set is passed.
	switch s.protocol {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if s.endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if s.endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(s.endpoint))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp %s exporter: %w", s.protocol, err)
	}
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

// Shutdown exports what is buffered and stops exporting, within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
