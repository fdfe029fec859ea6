package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunServer starts a nats-server with JetStream on disk in dir, on
// 127.0.0.1:port (-1 picks a free port), and shuts it down when the test
// ends. StopServer may stop it earlier; a server started again on the same
// dir and port finds its streams.
func RunServer(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		StopServer(ns)
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { StopServer(ns) })
	return ns
}

// StopServer shuts ns down and waits; it is idempotent.
func StopServer(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

// Port is the port ns listens on.
func Port(t testing.TB, ns *server.Server) int {
	t.Helper()
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("server address %v is not TCP", ns.Addr())
	}
	return addr.Port
}

// Connect dials ns with opts and returns the connection, closed when the
// test ends, and a JetStream context over it.
func Connect(t testing.TB, ns *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}
