package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestInheritFlow: a span started under a local Drover span takes its
// flow, one naming its own keeps it, and one continuing a remote parent or
// with no parent gets none (nothing to inherit from).
func TestInheritFlow(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t, 1)
	tr := tp.Tracer("test")
	pctx, parent := tr.Start(context.Background(), "parent", trace.WithAttributes(KeyFlow.String("f")))
	gctx, child := tr.Start(pctx, "child")
	_, grandchild := tr.Start(gctx, "grandchild")
	_, own := tr.Start(pctx, "own", trace.WithAttributes(KeyFlow.String("g")))
	_, remote := tr.Start(ContextWithOwner(context.Background(), Owner{Flow: "f"}), "remote")
	_, root := tr.Start(context.Background(), "root")
	for _, s := range []trace.Span{grandchild, child, own, remote, root, parent} {
		s.End()
	}
	want := map[string]string{"parent": "f", "child": "f", "grandchild": "f", "own": "g", "remote": "", "root": ""}
	got := map[string]string{}
	for _, s := range rec.Ended() {
		got[s.Name()] = ""
		for _, kv := range s.Attributes() {
			if kv.Key == KeyFlow {
				if got[s.Name()] != "" {
					t.Errorf("%s: drover.flow.id twice", s.Name())
				}
				got[s.Name()] = kv.Value.AsString()
			}
		}
	}
	for name, flow := range want {
		if g, ok := got[name]; !ok || g != flow {
			t.Errorf("%s: drover.flow.id %q, want %q", name, g, flow)
		}
	}
}
