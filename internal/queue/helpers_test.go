package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// Every test runs against a real in-process nats-server; goleak checks that
// servers, connections and consumers are all shut down. No goroutine is
// ignored: a shut-down nats-server leaves none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx is bounded so a hung server call fails the test instead of the
// whole binary timing out.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startServer starts a nats-server on a free port in a fresh store dir and
// stops it when the test ends.
func startServer(t testing.TB) *server.Server {
	t.Helper()
	return natstest.RunServer(t, t.TempDir(), -1)
}

func connect(t testing.TB, ns *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return natstest.Connect(t, ns)
}

// setup is a server with every Drover stream and bucket ensured.
func setup(t testing.TB) (*server.Server, jetstream.JetStream) {
	t.Helper()
	ns := startServer(t)
	_, js := connect(t, ns)
	if err := Ensure(testCtx(t), js, StreamOptions{}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return ns, js
}

func streamInfo(t testing.TB, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	ctx := testCtx(t)
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return info
}

func streamMsgs(t testing.TB, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	return streamInfo(t, js, name).State.Msgs
}

// fakeClock is the claims clock. It reads real time until pinned: claim
// staleness compares the clock with the server's timestamp of the claim's
// last write, so tests pin the clock relative to that timestamp (the KV
// entry's Created) rather than sleeping past a lease.
type fakeClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return time.Now()
	}
	return c.at
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = t
}
