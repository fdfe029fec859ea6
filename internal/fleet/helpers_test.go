package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup is a nats-server with every Drover stream and bucket ensured.
func setup(t testing.TB) jetstream.JetStream {
	t.Helper()
	_, js := natstest.Connect(t, natstest.RunServer(t, t.TempDir(), -1))
	if err := queue.Ensure(testCtx(t), js, queue.StreamOptions{}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return js
}
