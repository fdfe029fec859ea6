package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/natstest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkPublishEventSync measures what JetStream's fsync setting costs
// Drover's event publishing, side by side on one machine: the server's
// default (fsync every 2 minutes), every second, and on every write (the
// setting Drover uses; see docs/design.md). "one" publishes one event at a
// time, waiting for each ack, as a worker does; "par16" keeps 16 publishers
// going, as a busy fleet does, letting the server batch its syncs.
func BenchmarkPublishEventSync(b *testing.B) {
	for _, fs := range []struct {
		name     string
		interval time.Duration
		always   bool
	}{{"default", 0, false}, {"1s", time.Second, false}, {"always", 0, true}} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/publishers=%d", fs.name, par), func(b *testing.B) {
				ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: b.TempDir(), Port: -1,
					SyncInterval: fs.interval, SyncAlways: fs.always})
				if err != nil {
					b.Fatal(err)
				}
				defer natstest.StopServer(ns)
				nc, err := nats.Connect(ns.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc)
				ctx := context.Background()
				if err := Ensure(ctx, js, StreamOptions{}); err != nil {
					b.Fatal(err)
				}
				// A typical phase event: ~400 bytes on the wire.
				data := event.RuntimeExitedData{Outcome: "exited", ExitCode: 0, DurationMS: 12345}
				b.SetBytes(400)
				b.ResetTimer()
				var wg sync.WaitGroup
				var mu sync.Mutex
				next := 0
				for p := range par {
					wg.Go(func() {
						for {
							mu.Lock()
							i := next
							next++
							mu.Unlock()
							if i >= b.N {
								return
							}
							ev, _ := event.New(fmt.Sprintf("runtime_exited:bench-f_t%d_%d:1", p, i), event.RuntimeExited,
								time.Now(), "bench-f", fmt.Sprintf("t%d", p), fmt.Sprintf("bench-f_t%d_%d", p, i+1), 1, data)
							if _, err := PublishEvent(ctx, js, ev); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
