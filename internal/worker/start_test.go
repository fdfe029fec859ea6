package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/startup"
)

// startConfig is a worker of one runtime whose binary is binary.
func startConfig(t *testing.T, binary string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "drover.yaml")
	body := "data_dir: " + dir + "\nworker:\n  id: w1\n  min_free_disk: 1KiB\n  runtimes: [probe]\nruntimes:\n  probe:\n    binary: " + binary + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startNATS is an embedded server with no Drover stream or bucket yet, and
// a connection to it.
func startNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// streams lists the server's streams.
func streams(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	l := js.StreamNames(context.Background())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestStartWaitsForTheControllersLayout: a worker started before the
// controller waits for its buckets, creating nothing itself, and claims
// once the controller has made them.
func TestStartWaitsForTheControllersLayout(t *testing.T) {
	nc, js := startNATS(t)
	cfg := startConfig(t, "echo")
	log := &lockedBuf{}
	w, err := New(cfg, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var before []string
	waited := false
	wait := startup.New(slog.New(slog.NewTextHandler(log, nil)), startup.Options{
		Sleep: func(ctx context.Context, _ time.Duration) error {
			if !waited {
				waited, before = true, streams(t, js)
				// The controller comes.
				if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			return ctx.Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx, nc, wait); err != nil {
		t.Fatal(err)
	}
	defer func() { w.HandBack(); w.Wait() }()
	if !waited || len(before) != 0 {
		t.Fatalf("streams while the worker waited: %v, want none (and a wait)", before)
	}
	if !strings.Contains(log.String(), `msg="waiting for Drover's buckets" reason="bucket drover-claims: queue: not created yet`) {
		t.Errorf("log does not say what the worker waits for:\n%s", log)
	}
	if _, err := js.Consumer(ctx, queue.AttemptsStream, queue.AttemptConsumerName("default", "probe")); err != nil {
		t.Errorf("the worker's consumer: %v", err)
	}
	if !w.loopsActive.Load() {
		t.Error("claim loops not started")
	}
}

// TestStartStopsWhileWaiting: a worker stopped before the controller came
// returns ErrStopped from Start with nothing running and nothing created.
func TestStartStopsWhileWaiting(t *testing.T) {
	nc, js := startNATS(t)
	w, err := New(startConfig(t, "echo"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sleeps := 0
	wait := startup.New(nil, startup.Options{Sleep: func(ctx context.Context, _ time.Duration) error {
		if sleeps++; sleeps == 3 {
			cancel() // SIGTERM
		}
		return ctx.Err()
	}})
	err = w.Start(ctx, nc, wait)
	if !errors.Is(err, startup.ErrStopped) {
		t.Fatalf("Start = %v, want ErrStopped", err)
	}
	w.Stop()
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a worker stopped while starting left goroutines running")
	}
	if got := streams(t, js); len(got) != 0 {
		t.Fatalf("a waiting worker created %v", got)
	}
}

// TestCheckRuntimesNeedsNoNATS: a host without a usable runtime is told
// before any connection.
func TestCheckRuntimesNeedsNoNATS(t *testing.T) {
	w, err := New(startConfig(t, "/nonexistent/probe-cli"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CheckRuntimes(context.Background()); err == nil || !strings.Contains(err.Error(), "none of the runtimes [probe] is available") {
		t.Fatalf("CheckRuntimes = %v", err)
	}
}
