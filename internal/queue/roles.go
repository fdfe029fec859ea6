package queue

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
)

// The queue's roles, each a small interface as jetstream's are: what one
// part of the system does with the queue, so that the worker and the
// controller hold what they use rather than reach for the queue's layout
// (its buckets, its subjects) themselves. *Claims and *Cancels implement
// them.

// Claimer claims attempts for a worker, which runs only what it holds.
type Claimer interface {
	// Acquire claims an attempt no one holds.
	Acquire(ctx context.Context, attempt, worker string) (*Lease, error)
	// AcquireOrTakeOver claims an attempt, taking over a stale claim.
	AcquireOrTakeOver(ctx context.Context, attempt, worker string) (*Lease, error)
}

// ClaimRevoker takes attempts back for the controller and follows the
// claims, to see their holders lapse.
type ClaimRevoker interface {
	// Revoke takes back an attempt no worker holds (ErrHeld when one does).
	Revoke(ctx context.Context, attempt string) error
	// RevokeLapsed takes back an attempt whose claim lapsed at revision rev.
	RevokeLapsed(ctx context.Context, attempt string, rev uint64) (*ClaimInfo, error)
	// Watch follows every change of the claims.
	Watch(ctx context.Context) (*ClaimWatcher, error)
}

// CancelWatcher hands a worker the controller's stop signals.
type CancelWatcher interface {
	// WatchCancels calls handle with every stop signal as received
	// (DecodeCancelSignal and LeaderEpoch read it) until stop is called.
	WatchCancels(handle nats.MsgHandler) (stop func() error, err error)
}

var (
	_ Claimer       = (*Claims)(nil)
	_ ClaimRevoker  = (*Claims)(nil)
	_ CancelWatcher = (*Cancels)(nil)
)

// Cancels carries stop signals over core NATS (SignalCancel sends them).
type Cancels struct{ nc *nats.Conn }

// NewCancels returns the stop signals of nc's server.
func NewCancels(nc *nats.Conn) *Cancels { return &Cancels{nc: nc} }

// WatchCancels subscribes handle to every attempt's stop signals.
func (c *Cancels) WatchCancels(handle nats.MsgHandler) (func() error, error) {
	sub, err := c.nc.Subscribe(CancelSubjects, handle)
	if err != nil {
		return nil, fmt.Errorf("queue: subscribe to %s: %w", CancelSubjects, err)
	}
	return sub.Unsubscribe, nil
}
