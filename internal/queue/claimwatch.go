package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ClaimInfo is one attempt's claim as stored in the claims bucket.
type ClaimInfo struct {
	Attempt string
	Worker  string
	Epoch   uint64
	// State is running, finished, released or lost; "deleted" when the key
	// was removed.
	State string
	// Revision changes with every write: a renewal, a takeover, an end.
	Revision uint64
}

// Running reports whether a worker holds the claim and must keep renewing it.
func (i *ClaimInfo) Running() bool { return i.State == claimRunning }

// Lost reports whether the controller declared the holder lost.
func (i *ClaimInfo) Lost() bool { return i.State == claimLost }

func claimInfo(e jetstream.KeyValueEntry) *ClaimInfo {
	info := &ClaimInfo{Attempt: e.Key(), Revision: e.Revision(), State: "deleted"}
	if e.Operation() != jetstream.KeyValuePut {
		return info
	}
	var rec claimRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		info.State = claimReleased // unreadable: protects nothing, as in Acquire
		return info
	}
	info.Worker, info.Epoch, info.State = rec.Worker, rec.Epoch, rec.State
	return info
}

// ClaimWatcher streams the claims bucket: first every current claim, then a
// nil, then each write as it happens.
type ClaimWatcher struct {
	kw  jetstream.KeyWatcher
	out chan *ClaimInfo
}

// Watch starts watching every claim. Stop it, or cancel ctx, when done.
// The underlying watcher survives reconnects and server restarts, but
// writes made while the connection is down arrive late, all at once.
func (c *Claims) Watch(ctx context.Context) (*ClaimWatcher, error) {
	kw, err := c.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: watch claims: %w", err)
	}
	w := &ClaimWatcher{kw: kw, out: make(chan *ClaimInfo, 64)}
	go func() {
		defer close(w.out)
		for e := range kw.Updates() {
			var info *ClaimInfo
			if e != nil {
				info = claimInfo(e)
			}
			select {
			case w.out <- info:
			case <-ctx.Done():
				return
			}
		}
	}()
	return w, nil
}

// Updates delivers the claims; nil marks the end of the current ones. It is
// closed when the watcher stops.
func (w *ClaimWatcher) Updates() <-chan *ClaimInfo { return w.out }

// Stop ends the watch.
func (w *ClaimWatcher) Stop() error { return w.kw.Stop() }

// RevokeLapsed ends an attempt whose holder stopped renewing: if the claim
// is still at revision rev — nobody renewed, finished or took it over since
// the caller saw it — it is marked lost, so no worker runs the attempt again
// and a holder that wakes up finds itself superseded. It returns the lost
// claim, naming the holder and epoch that lapsed, or ErrHeld when the claim
// changed meanwhile. Revoking a claim that is
// already lost is a no-op that returns it, so a controller that crashed
// between revoking and recording the loss can finish the job.
func (c *Claims) RevokeLapsed(ctx context.Context, attempt string, rev uint64) (*ClaimInfo, error) {
	e, err := c.kv.Get(ctx, attempt)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, ErrHeld // gone: nothing of ours to revoke
		}
		return nil, fmt.Errorf("queue: read claim %s: %w", attempt, err)
	}
	info := claimInfo(e)
	if info.Lost() {
		return info, nil
	}
	if e.Revision() != rev || !info.Running() {
		return nil, ErrHeld
	}
	// The lost claim keeps the holder's worker and epoch: they name what was
	// lost. The holder is fenced by the revision its next renewal expects.
	rec := claimRecord{Worker: info.Worker, Epoch: info.Epoch, State: claimLost}
	newRev, err := c.kv.Update(ctx, attempt, mustJSON(rec), rev)
	if err != nil {
		if IsConditionFailed(err) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("queue: revoke lapsed claim %s: %w", attempt, err)
	}
	info.State, info.Revision = claimLost, newRev
	return info, nil
}
