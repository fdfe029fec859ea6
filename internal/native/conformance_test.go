package native_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/adapter/adaptertest"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// TestConformance runs the adapter conformance suite against the native
// runtime: in process with the directed model, and built from its
// configuration, as a worker builds it, against each wire protocol's test
// server answering as the directed model.
func TestConformance(t *testing.T) {
	base := adaptertest.Case{
		Prompt:          "create hello.txt containing hi\n@write hello.txt hi",
		FailPrompt:      "create hello.txt containing hi\n@fail 429 7",
		WantClassOnFail: drovertype.ClassRateLimited, WantStatusOnFail: 429,
		Agent: adaptertest.AgentPrompts{
			Hang:  "@hang",
			Env:   "@bash env > env.txt",
			Scope: "@write inside/ok.txt ok\n@write outside.txt no\n@write ../escaped.txt no",
		},
	}
	c := base
	c.Name = "directed"
	c.New = func(*testing.T) adapter.Adapter {
		return native.AdapterOf(native.NewRuntime("native-directed", native.Config{Provider: "directed", Model: "directed-model"}, nativetest.DirectedClient{}))
	}
	adaptertest.RunConformance(t, c)
	for _, p := range providers {
		c := base
		c.Name = p.name
		const key = "conformance-key-0123"
		c.New = func(t *testing.T) adapter.Adapter {
			srv := p.new(t, key).RespondWith(nativetest.Directed)
			t.Setenv("CONFORMANCE_API_KEY", key)
			a, err := native.NewAdapter("native-"+p.name, runtimeConfig(p.name, srv.BaseURL(), "CONFORMANCE_API_KEY"))
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		c.NewMissing = func(t *testing.T) adapter.Adapter {
			srv := p.new(t, key).RespondWith(nativetest.Directed)
			a, err := native.NewAdapter("native-"+p.name, runtimeConfig(p.name, srv.BaseURL(), "CONFORMANCE_UNSET_API_KEY"))
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		adaptertest.RunConformance(t, c)
	}
}
