package objstore

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
)

// TestArtifactsOpenTheBucketOnce: a worker stores two artifacts a task,
// and opening the bucket is a request for its stream's info: it is asked
// once, not per artifact. A bucket not there yet is no handle kept:
// once the controller has made it, the next artifact is stored.
func TestArtifactsOpenTheBucketOnce(t *testing.T) {
	ns := natstest.RunServer(t, t.TempDir(), -1)
	nc, js := natstest.Connect(t, ns)
	var infos atomic.Int32
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO.OBJ_"+queue.ArtifactsBucket, func(*nats.Msg) { infos.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a := NewArtifacts(js)
	if _, err := a.Put(ctx, "early", strings.NewReader("x")); err == nil {
		t.Fatal("stored an artifact before the bucket was made")
	}
	if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	before := infos.Load()
	for i := range 5 {
		body := strings.Repeat("artifact ", i+1)
		if n, err := a.Put(ctx, "a"+string(rune('0'+i)), strings.NewReader(body)); err != nil || n != int64(len(body)) {
			t.Fatalf("put %d: %d bytes, %v", i, n, err)
		}
	}
	r, err := a.Get(ctx, "a4")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(got) != strings.Repeat("artifact ", 5) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := infos.Load() - before; n != 1 {
		t.Errorf("%d stream info requests for 5 artifacts stored and 1 read, want 1", n)
	}
}
