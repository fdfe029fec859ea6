package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// TestFetchEndsAtReconnection: a claim loop's fetch waits on a request the
// server holds for its connection. When the connection drops and comes back
// (a network cut, a killed server: no shutdown notice), the server has
// forgotten the request; the fetch must end when the connection is back,
// not two heartbeats or fetchWait (32 s) later, and the next fetch gets
// the job. Without the reconnection watch the first fetch outlives the
// test's bound.
func TestFetchEndsAtReconnection(t *testing.T) {
	if fetchWait < 20*time.Second || 2*fetchHeartbeat < 20*time.Second {
		t.Fatalf("fetchWait %s, heartbeat %s: the test's bound would not tell a reconnection from an expiry", fetchWait, fetchHeartbeat)
	}
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureAttemptConsumer(ctx, js, "default", "demo", queue.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newReconnects()
	go r.watch(ctx, nc)

	fetched := make(chan error, 1)
	go func() {
		fctx, done := r.fetchContext(ctx)
		defer done()
		_, err := cons.Next(fetchOpts(fctx)...)
		fetched <- err
	}()
	waitUntil(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 1
	})

	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fetched:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("fetch ended with %v, want context.Canceled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the fetch of the connection before is still waiting 15 s after the reconnection")
	}
	waitUntil(t, nc.IsConnected)

	job := &queue.Job{Attempt: drovertype.AttemptID("f", "a", 1), Flow: "f", Task: "a", N: 1, Pool: "default", Runtime: "demo",
		Repo: "/r.git", Base: "main", Branch: drovertype.AttemptBranch("f", "a", 1), Prompt: "p"}
	if err := queue.PublishJob(ctx, js, job); err != nil {
		t.Fatal(err)
	}
	fctx, done := r.fetchContext(ctx)
	defer done()
	msg, err := cons.Next(fetchOpts(fctx)...)
	if err != nil {
		t.Fatalf("fetch after the reconnection: %v", err)
	}
	if got, err := queue.DecodeJob(msg.Data()); err != nil || got.Attempt != job.Attempt {
		t.Fatalf("fetched %v (%v), want %s", got, err, job.Attempt)
	}
}
