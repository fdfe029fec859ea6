package controller

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/startup"
)

// TestConnectAndEnsureWaitsForNATS: the controller started before its
// NATS server waits for it, then creates the layout.
func TestConnectAndEnsureWaitsForNATS(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	sleeps := 0
	w := startup.New(nil, startup.Options{Sleep: func(ctx context.Context, _ time.Duration) error {
		if sleeps++; sleeps == 2 {
			ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: port})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		}
		return ctx.Err()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	co := natsconn.ClientOptions{URL: "nats://127.0.0.1:" + strconv.Itoa(port), Timeout: time.Second}
	nc, js, err := connectAndEnsure(ctx, w, co, queue.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if sleeps < 2 {
		t.Fatalf("connected after %d waits, before the server started", sleeps)
	}
	if err := queue.CheckBuckets(ctx, js); err != nil {
		t.Fatalf("layout after connectAndEnsure: %v", err)
	}
	if _, err := js.Stream(ctx, queue.EventsStream); err != nil {
		t.Fatal(err)
	}
}

// TestConnectAndEnsureRefusedLayout: a layout JetStream refuses for good
// is returned at once, the connection closed.
func TestConnectAndEnsureRefusedLayout(t *testing.T) {
	t.Parallel()
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	w := startup.New(nil, startup.Options{Sleep: func(context.Context, time.Duration) error {
		t.Error("waited on a refused layout")
		return nil
	}})
	nc, _, err := connectAndEnsure(context.Background(), w, natsconn.ClientOptions{URL: ns.ClientURL()}, queue.StreamOptions{Replicas: 3})
	var ce *queue.ConfigError
	if nc != nil || !errors.As(err, &ce) || !startup.IsFatal(err) {
		t.Fatalf("connectAndEnsure = %v, %v; want a fatal ConfigError", nc, err)
	}
}
