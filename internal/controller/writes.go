package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/queue"
)

// The operator's writes (submit, cancel, retry, pause, resume, budget) are
// the leader's to record. Every controller answers them on the API's
// subjects: the leader handles them, any other forwards them to the
// subjects only the leader serves (LeaderSubject), and relays the answer.
// A write that reaches no leader — during a handover — waits for one.

// leaderPrefix begins the subjects only the leader serves.
const leaderPrefix = queue.APIPrefix + ".leader."

// LeaderSubject is where the leader answers a write verb's subject.
func LeaderSubject(subject string) string {
	return leaderPrefix + strings.TrimPrefix(subject, queue.APIPrefix+".")
}

// controllerPrefix begins the subjects one controller answers its reads on.
const controllerPrefix = queue.APIPrefix + ".controller."

// ControllerSubject is where controller id answers a read verb's subject
// from its own projection: `controller rebuild --controller ID`.
func ControllerSubject(id, subject string) string {
	return controllerPrefix + id + "." + strings.TrimPrefix(subject, queue.APIPrefix+".")
}

// writeHere handles a write when this controller leads, and forwards it to
// the leader otherwise.
func (c *Controller) writeHere(subject string, fn func(context.Context, micro.Request)) func(context.Context, micro.Request) {
	return func(ctx context.Context, r micro.Request) {
		if _, err := c.leading(); err == nil {
			fn(ctx, r)
			return
		}
		c.forward(ctx, r, LeaderSubject(subject))
	}
}

// forwardTimeout bounds one forwarded write: a submission of a large flow
// takes a while.
const forwardTimeout = 2 * time.Minute

// forwardWait is how long a write waits for a leader: a lapsed lease (its
// TTL), an election, with room to spare.
func (c *Controller) forwardWait() time.Duration {
	ttl := c.cfg.Controller.LeaseTTL
	if ttl == 0 {
		ttl = 3 * time.Second
	}
	return 2*ttl + 5*time.Second
}

// forward sends r to the leader and relays its answer, headers (errors,
// transfers) and all. While no controller leads, or the one asked stopped
// leading before the write took effect, it tries again, up to forwardWait.
func (c *Controller) forward(ctx context.Context, r micro.Request, subject string) {
	nc := c.js.Conn()
	deadline := time.Now().Add(c.forwardWait())
	pause := 50 * time.Millisecond
	for {
		req := &nats.Msg{Subject: subject, Data: r.Data(), Header: nats.Header(r.Headers())}
		rctx, cancel := context.WithTimeout(ctx, forwardTimeout)
		reply, err := nc.RequestMsgWithContext(rctx, req)
		cancel()
		again := errors.Is(err, nats.ErrNoResponders) || err == nil && reply.Header.Get(micro.ErrorCodeHeader) == CodeUnavailable
		if !again || time.Now().After(deadline) {
			switch {
			case err == nil:
				_ = r.Respond(reply.Data, micro.WithHeaders(micro.Headers(reply.Header)))
			case errors.Is(err, nats.ErrNoResponders):
				_ = r.Error(CodeUnavailable, fmt.Sprintf("no controller leads now (waited %s): a handover takes about the lease TTL; is more than one controller running?", c.forwardWait()), nil)
			default:
				_ = r.Error(CodeInternal, fmt.Sprintf("forward to the leader: %v", err), nil)
			}
			return
		}
		select {
		case <-ctx.Done():
			_ = r.Error(CodeUnavailable, "the controller is stopping", nil)
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// serveLeaderAPI answers the writes on the leader's subjects for as long as
// ctx (the term) lasts; stop stops it.
func (c *Controller) serveLeaderAPI(ctx context.Context) (stop func(), err error) {
	svc, err := micro.AddService(c.js.Conn(), micro.Config{
		Name: "drover-leader", Version: "0.1.0", Description: "Drover operator API: the writes, which the leader records",
	})
	if err != nil {
		return nil, fmt.Errorf("controller: leader api: %w", err)
	}
	for _, e := range c.endpoints() {
		if !e.write {
			continue
		}
		if err := svc.AddEndpoint(e.name, micro.ContextHandler(ctx, e.fn), micro.WithEndpointSubject(LeaderSubject(e.subject))); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("controller: leader api %s: %w", e.name, err)
		}
	}
	return func() { _ = svc.Stop() }, nil
}

// writeFailed answers a write that could not be recorded: unavailable (and
// worth sending again) when this controller does not lead or stopped
// leading before it took effect, an internal error otherwise.
func (c *Controller) writeFailed(r micro.Request, err error) {
	if errors.Is(err, ErrNotLeader) || errors.Is(err, errFenced) {
		_ = r.Error(CodeUnavailable, err.Error(), nil)
		return
	}
	_ = r.Error(CodeInternal, err.Error(), nil)
}
