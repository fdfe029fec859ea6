package natsconn

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// Every test runs against a real in-process nats-server; goleak checks that
// servers and connections are all shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t testing.TB) *server.Server {
	t.Helper()
	return startServerAt(t, t.TempDir(), -1)
}

func startServerAt(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	ns, err := StartEmbedded(EmbeddedOptions{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	t.Cleanup(func() { stopServer(ns) })
	return ns
}

func stopServer(ns *server.Server) { natstest.StopServer(ns) }

func serverPort(t testing.TB, ns *server.Server) int { return natstest.Port(t, ns) }

func connect(t testing.TB, ns *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return natstest.Connect(t, ns)
}
