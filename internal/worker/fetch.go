package worker

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A claim loop's fetch waits up to fetchWait for a job, the server sending
// an idle heartbeat every fetchHeartbeat meanwhile. The consumer's server
// scans every waiting fetch each time one of them is due a heartbeat or
// expires, so its cost grows with the idle workers times their fetches'
// wake-ups: with nats.go's default heartbeat (5 s on a 30 s fetch) 1,000
// idle workers kept a quarter of its core busy (docs/benchmarks.md, "1,000
// workers polling"). Two wake-ups per fetch instead of six; a fetch lost
// with its connection is not waited out (reconnects). The price: a fetch
// held by a cluster node that dies while the worker's own node lives is
// given up after two missed heartbeats, 30 s instead of 10. nats.go asks the
// server for an expiry a second short of the context's, and refuses one
// under twice the heartbeat.
const (
	fetchHeartbeat = 15 * time.Second
	fetchWait      = 2*fetchHeartbeat + 2*time.Second
)

// fetchOpts are a fetch's options under ctx.
func fetchOpts(ctx context.Context) []jetstream.FetchOpt {
	return []jetstream.FetchOpt{jetstream.FetchContext(ctx), jetstream.FetchHeartbeat(fetchHeartbeat)}
}

// reconnects ends the fetches under way each time the connection is
// established again: the server forgot their requests with the connection
// that carried them, and a claim loop would otherwise wait a whole
// fetchWait (or two heartbeats) for a job that cannot come.
type reconnects struct {
	mu  sync.Mutex
	ctx context.Context // ends at the next reconnection
	end context.CancelFunc
}

func newReconnects() *reconnects {
	r := &reconnects{}
	r.ctx, r.end = context.WithCancel(context.Background())
	return r
}

// fetchContext is ctx bounded by fetchWait and by the next reconnection.
func (r *reconnects) fetchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	r.mu.Lock()
	gen := r.ctx
	r.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, fetchWait)
	stop := context.AfterFunc(gen, cancel)
	return fctx, func() { stop(); cancel() }
}

// reconnected ends the fetches of the connection before.
func (r *reconnects) reconnected() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end()
	r.ctx, r.end = context.WithCancel(context.Background())
}

// watch calls reconnected at each reconnection of nc until ctx ends.
func (r *reconnects) watch(ctx context.Context, nc *nats.Conn) {
	ch := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(ch)
	for {
		select {
		case <-ch:
			r.reconnected()
		case <-ctx.Done():
			return
		}
	}
}

// ClaimTimes is when a job a worker claimed was stored by the server, was
// delivered to the worker's fetch, and was claimed.
type ClaimTimes struct {
	Attempt                    string
	Stored, Delivered, Claimed time.Time
}

// WithClaimTimes has the worker call observe with the times of each claim
// it makes: the fleet simulator splits the claim's wait with them. observe
// runs on the claiming goroutine; it must be quick and safe for concurrent
// use.
func WithClaimTimes(observe func(ClaimTimes)) Option {
	return func(o *options) { o.claimTimes = observe }
}
