package controller

import (
	"context"
	"os"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
)

// registryEvery is how often a controller renews its registration in
// drover-controllers: how fresh `controller controllers` is.
const registryEvery = 2 * time.Second

// registryLoop keeps this controller's registration until ctx ends, then
// removes it.
func (c *Controller) registryLoop(ctx context.Context, ttl time.Duration) {
	host, _ := os.Hostname()
	t := time.NewTicker(registryEvery)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, registryEvery)
		if err := fleet.RegisterController(rctx, c.js, c.registration(rctx, host, ttl)); err != nil && ctx.Err() == nil {
			c.log.Debug("register controller", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = fleet.DeregisterController(dctx, c.js, c.id)
			return
		case <-t.C:
		case <-c.roleChanged:
		}
	}
}

// registration is what this controller tells the others now.
func (c *Controller) registration(ctx context.Context, host string, ttl time.Duration) *fleet.Controller {
	r := &fleet.Controller{ID: c.id, Host: host, Role: fleet.RoleStandby, LeaseTTL: ttl, Started: c.started, Seen: time.Now()}
	c.store.Read(func(st *projection.State) { r.Epoch = st.LeaderEpoch() })
	if lt, err := c.leading(); err == nil {
		r.Role, r.Epoch = fleet.RoleLeader, lt.epoch
	}
	r.Applied = c.store.Applied()
	if last, err := c.streamLast(ctx); err == nil && last > r.Applied {
		r.Lag = last - r.Applied
	}
	return r
}

// streamLast is the EVENTS stream's last sequence.
func (c *Controller) streamLast(ctx context.Context) (uint64, error) {
	s, err := c.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}

// changedRole has the registration written again now: this controller's
// term began or ended.
func (c *Controller) changedRole() {
	select {
	case c.roleChanged <- struct{}{}:
	default:
	}
}
