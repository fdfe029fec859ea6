package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestCheckJetStream(t *testing.T) {
	t.Parallel()
	_, js := connect(t, startServer(t))
	if err := CheckJetStream(testCtx(t), js); err != nil {
		t.Fatalf("JetStream on: %v", err)
	}

	// A server without JetStream: a configuration of the server that the
	// error names (the controller waits on it: the server may be restarted
	// with JetStream on).
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { natstest.StopServer(ns) })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	_, js = connect(t, ns)
	err = CheckJetStream(testCtx(t), js)
	if err == nil || !errors.Is(err, jetstream.ErrJetStreamNotEnabled) || !strings.Contains(err.Error(), "JetStream is not enabled on the server") {
		t.Fatalf("JetStream off: %v", err)
	}
}

func TestCheckBuckets(t *testing.T) {
	t.Parallel()
	_, js := connect(t, startServer(t))
	ctx := testCtx(t)
	err := CheckBuckets(ctx, js)
	if !errors.Is(err, ErrNotCreated) || !strings.HasPrefix(err.Error(), "bucket "+ClaimsBucket+": ") {
		t.Fatalf("before Ensure: %v, want the claims bucket not created yet", err)
	}
	// Part of the layout is not enough: the artifacts store is last.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ClaimsBucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: WorkersBucket}); err != nil {
		t.Fatal(err)
	}
	if err := CheckBuckets(ctx, js); !errors.Is(err, ErrNotCreated) || !strings.Contains(err.Error(), ArtifactsBucket) {
		t.Fatalf("without artifacts: %v", err)
	}
	// The layout of a controller older than the jobs store: a worker
	// starts (it reads the store only for a job such a controller never
	// queues), so workers can be upgraded first.
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ArtifactsBucket}); err != nil {
		t.Fatal(err)
	}
	if err := CheckBuckets(ctx, js); err != nil {
		t.Fatalf("without the jobs store: %v", err)
	}
	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := CheckBuckets(ctx, js); err != nil {
		t.Fatalf("after Ensure: %v", err)
	}
}

// TestEnsureConfigErrors: what Ensure can never create is a *ConfigError
// saying what to look at; what a wait may fix is not.
func TestEnsureConfigErrors(t *testing.T) {
	t.Parallel()
	t.Run("replicas on a standalone server", func(t *testing.T) {
		t.Parallel()
		_, js := connect(t, startServer(t))
		err := Ensure(testCtx(t), js, StreamOptions{Replicas: 3})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "nats.replicas is above 1 but the NATS server is not clustered") {
			t.Fatalf("err = %v, want a ConfigError about nats.replicas", err)
		}
	})
	t.Run("another stream takes the subjects", func(t *testing.T) {
		t.Parallel()
		_, js := connect(t, startServer(t))
		ctx := testCtx(t)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SOMEONE_ELSE", Subjects: []string{"drover.>"}}); err != nil {
			t.Fatal(err)
		}
		err := Ensure(ctx, js, StreamOptions{})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "takes Drover's subjects") || !strings.Contains(err.Error(), EventsStream) {
			t.Fatalf("err = %v, want a ConfigError naming the events stream and the overlap", err)
		}
	})
	t.Run("no server answering", func(t *testing.T) {
		t.Parallel()
		ns := startServer(t)
		_, js := connect(t, ns)
		natstest.StopServer(ns)
		ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
		defer cancel()
		err := Ensure(ctx, js, StreamOptions{})
		var ce *ConfigError
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("err = %v with the server gone, want a plain error", err)
		}
	})
}

// TestCheckBucketsServerGone: a connection to a server that went away
// fails the check (it is tried again), and says so.
func TestCheckBucketsServerGone(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	nc, err := nats.Connect(ns.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	natstest.StopServer(ns)
	if err := CheckBuckets(testCtx(t), js); err == nil || errors.Is(err, ErrNotCreated) {
		t.Fatalf("server gone: %v", err)
	}
}
