package tracing

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/tracing/tracingtest"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		env  map[string]string
		on   bool
		want settings // compared when on
		err  string
	}{
		{name: "off by default"},
		{name: "drover key", cfg: Config{Exporter: "otlp"}, on: true,
			want: settings{protocol: ProtocolHTTP, ratio: 1, endpoint: "http://localhost:4318/v1/traces", from: "default", setEndpoint: true}},
		{name: "OTEL_TRACES_EXPORTER turns it on", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true,
			want: settings{protocol: ProtocolHTTP, ratio: 1, endpoint: "http://localhost:4318/v1/traces", from: "default", setEndpoint: true}},
		{name: "the drover key wins over OTEL_TRACES_EXPORTER", cfg: Config{Exporter: "none"},
			env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "OTEL_TRACES_EXPORTER=none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "OTEL_SDK_DISABLED wins over everything", cfg: Config{Exporter: "otlp"},
			env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			err: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "protocol from the signal variable first", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true,
			want: settings{protocol: ProtocolGRPC, ratio: 1, endpoint: "http://localhost:4317", from: "default", setEndpoint: true}},
		{name: "protocol from the general variable", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true,
			want: settings{protocol: ProtocolGRPC, ratio: 1, endpoint: "http://localhost:4317", from: "default", setEndpoint: true}},
		{name: "the drover protocol wins", cfg: Config{Exporter: "otlp", Protocol: "http/protobuf"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true,
			want: settings{protocol: ProtocolHTTP, ratio: 1, endpoint: "http://localhost:4318/v1/traces", from: "default", setEndpoint: true}},
		{name: "http/json is not offered", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{name: "an http endpoint is a base URL", cfg: Config{Exporter: "otlp", Endpoint: "http://collector:4318", SampleRatio: 0.25,
			ServiceName: "ctl"}, on: true,
			want: settings{protocol: ProtocolHTTP, endpoint: "http://collector:4318/v1/traces", from: "tracing.endpoint", setEndpoint: true,
				ratio: 0.25, service: "ctl"}},
		{name: "an http endpoint with a path prefix", cfg: Config{Exporter: "otlp", Endpoint: "https://gw.example/otlp/"}, on: true,
			want: settings{protocol: ProtocolHTTP, endpoint: "https://gw.example/otlp/v1/traces", from: "tracing.endpoint", setEndpoint: true, ratio: 1}},
		{name: "a grpc endpoint is used as it is", cfg: Config{Exporter: "otlp", Protocol: "grpc", Endpoint: "https://collector:4317"}, on: true,
			want: settings{protocol: ProtocolGRPC, endpoint: "https://collector:4317", from: "tracing.endpoint", setEndpoint: true, ratio: 1}},
		{name: "the drover endpoint wins over the variables", cfg: Config{Exporter: "otlp", Endpoint: "http://mine:4318"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env:4318/x"}, on: true,
			want: settings{protocol: ProtocolHTTP, endpoint: "http://mine:4318/v1/traces", from: "tracing.endpoint", setEndpoint: true, ratio: 1}},
		// The variables are left to the exporter, which reads them with
		// their companions; the settings only say where that is.
		{name: "the signal variable is a full URL", cfg: Config{Exporter: "otlp"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env:4318/x"}, on: true,
			want: settings{protocol: ProtocolHTTP, endpoint: "http://env:4318/x", from: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ratio: 1}},
		{name: "the general variable is a base URL", cfg: Config{Exporter: "otlp"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://env:4318/p"}, on: true,
			want: settings{protocol: ProtocolHTTP, endpoint: "https://env:4318/p/v1/traces", from: "OTEL_EXPORTER_OTLP_ENDPOINT", ratio: 1}},
		{name: "a grpc target from the general variable", cfg: Config{Exporter: "otlp", Protocol: "grpc"},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, on: true,
			want: settings{protocol: ProtocolGRPC, endpoint: "collector:4317", from: "OTEL_EXPORTER_OTLP_ENDPOINT", ratio: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.cfg.resolve(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.on != tc.on {
				t.Fatalf("on = %v (%s), want %v", s.on, s.why, tc.on)
			}
			if !s.on {
				if s.why == "" {
					t.Error("off without saying why")
				}
				return
			}
			tc.want.on, tc.want.wait = true, shutdownWait
			if s != tc.want {
				t.Errorf("settings %+v, want %+v", s, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{SampleRatio: 1}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (Config{Exporter: "otlp", Protocol: "grpc", Endpoint: "https://c:4317", SampleRatio: 0.1}).Validate(); err != nil {
		t.Errorf("a full config: %v", err)
	}
	for _, tc := range []struct {
		cfg Config
		key string
	}{
		{Config{Exporter: "jaeger", SampleRatio: 1}, "tracing.exporter"},
		{Config{Protocol: "http", SampleRatio: 1}, "tracing.protocol"},
		{Config{Endpoint: "collector:4317", SampleRatio: 1}, "tracing.endpoint"},
		{Config{Endpoint: "ftp://collector", SampleRatio: 1}, "tracing.endpoint"},
		{Config{SampleRatio: 0}, "tracing.sample_ratio"},
		{Config{SampleRatio: 1.5}, "tracing.sample_ratio"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.key+": ") {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.key)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSetupOff(t *testing.T) {
	p, err := Setup(context.Background(), Config{}, Process{Service: "drover-test"}, discard())
	if err != nil || p != nil || Enabled() {
		t.Fatalf("Setup with nothing set: %v, %v, enabled %v", p, err, Enabled())
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSetupHTTP exports over OTLP/HTTP to an in-process receiver, configured
// by Drover's keys.
func TestSetupHTTP(t *testing.T) {
	rcv := tracingtest.NewHTTP(t)
	p := setup(t, Config{Exporter: "otlp", Protocol: "http/protobuf", Endpoint: rcv.URL()})
	exportOne(t, p)
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Service() != "drover-test" || spans[0].Resource["service.instance.id"] != "w1" {
		t.Fatalf("received %+v", spans)
	}
}

// TestSetupGRPCFromEnv exports over OTLP/gRPC configured by the standard
// variables alone.
func TestSetupGRPCFromEnv(t *testing.T) {
	rcv := tracingtest.NewGRPC(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	p := setup(t, Config{})
	exportOne(t, p)
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Service() != "from-env" || spans[0].Name != "probe" {
		t.Fatalf("received %+v", spans)
	}
}

func setup(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := Setup(context.Background(), cfg, Process{Service: "drover-test", Instance: "w1"}, discard())
	if err != nil || p == nil {
		t.Fatalf("Setup: %v, %v", p, err)
	}
	t.Cleanup(resetGlobals)
	if !Enabled() {
		t.Fatal("Setup did not install the provider")
	}
	return p
}

// exportOne ends one span and shuts the provider down, which exports it.
func exportOne(t *testing.T, p *Provider) {
	t.Helper()
	_, span := Tracer().Start(context.Background(), "probe")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
