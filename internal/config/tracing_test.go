package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/tracing"
)

func TestTracing(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing != (tracing.Config{SampleRatio: 1}) {
		t.Errorf("tracing defaults %+v, want off with ratio 1", c.Tracing)
	}
	file := writeFile(t, "tracing:\n  exporter: otlp\n  protocol: grpc\n  endpoint: http://collector:4317\n  sample_ratio: 0.5\n  service_name: ctl\n")
	if c, err = Load(LoadOptions{File: file}); err != nil {
		t.Fatal(err)
	}
	want := tracing.Config{Exporter: "otlp", Protocol: "grpc", Endpoint: "http://collector:4317", SampleRatio: 0.5, ServiceName: "ctl"}
	if c.Tracing != want {
		t.Errorf("from the file: %+v, want %+v", c.Tracing, want)
	}
	// Every key has its DROVER_ variable, above the file.
	for k, v := range map[string]string{"DROVER_TRACING_EXPORTER": "none", "DROVER_TRACING_PROTOCOL": "http/protobuf",
		"DROVER_TRACING_ENDPOINT": "https://gw:443", "DROVER_TRACING_SAMPLE_RATIO": "0.1", "DROVER_TRACING_SERVICE_NAME": "env"} {
		t.Setenv(k, v)
	}
	if c, err = Load(LoadOptions{File: file}); err != nil {
		t.Fatal(err)
	}
	want = tracing.Config{Exporter: "none", Protocol: "http/protobuf", Endpoint: "https://gw:443", SampleRatio: 0.1, ServiceName: "env"}
	if c.Tracing != want {
		t.Errorf("from the environment: %+v, want %+v", c.Tracing, want)
	}
}

func TestTracingInvalid(t *testing.T) {
	for _, tc := range []struct{ file, key string }{
		{"tracing:\n  exporter: jaeger\n", "tracing.exporter"},
		{"tracing:\n  protocol: http\n", "tracing.protocol"},
		{"tracing:\n  endpoint: collector:4317\n", "tracing.endpoint"},
		{"tracing:\n  sample_ratio: 2\n", "tracing.sample_ratio"},
		{"tracing:\n  sample_ratio: 0\n", "tracing.sample_ratio"},
		{"tracing:\n  exporter: jaeger\n  sample_ratio: -1\n", "tracing.sample_ratio"},
		{"tracing:\n  sampler: always\n", "sampler"},
	} {
		_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v, want one naming %s", tc.file, err, tc.key)
		}
	}
}
