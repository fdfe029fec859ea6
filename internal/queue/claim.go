package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Claim outcomes and errors.
var (
	// ErrHeld means a live worker holds the attempt: do not run it again.
	ErrHeld = errors.New("queue: attempt held by a live worker")
	// ErrFinished means the attempt already reported: ack the job, run nothing.
	ErrFinished = errors.New("queue: attempt already finished")
	// ErrSuperseded means another worker took the attempt over: stop at once
	// and publish nothing more; the fold ignores this epoch from now on.
	ErrSuperseded = errors.New("queue: claim superseded")
)

// Claim states.
const (
	claimRunning  = "running"
	claimFinished = "finished"
	claimReleased = "released"
	// claimLost: the controller found the holder silent for a lease and
	// ended the attempt (attempt_lost); nobody runs it again.
	claimLost = "lost"
)

type claimRecord struct {
	Worker string `json:"worker"`
	Epoch  uint64 `json:"epoch"`
	State  string `json:"state"`
}

// Claims fences attempts: at most one live holder per attempt, and every
// takeover raises the epoch, which workers stamp on their events.
type Claims struct {
	kv    jetstream.KeyValue
	lease time.Duration
	now   func() time.Time
}

// NewClaims opens the claims bucket. A claim not renewed for lease is stale
// and may be taken over. now is the clock; nil means time.Now.
func NewClaims(ctx context.Context, js jetstream.JetStream, lease time.Duration, now func() time.Time) (*Claims, error) {
	kv, err := js.KeyValue(ctx, ClaimsBucket)
	if err != nil {
		return nil, fmt.Errorf("queue: open claims bucket: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Claims{kv: kv, lease: lease, now: now}, nil
}

// Lease is a worker's hold on one attempt. It is safe for concurrent use:
// the worker renews it from a heartbeat goroutine while the attempt's own
// goroutine finishes or releases it.
type Lease struct {
	c       *Claims
	attempt string
	epoch   uint64 // fixed for the life of the lease

	mu  sync.Mutex // serialises writes: each must chain on the last revision
	rec claimRecord
	rev uint64
}

func newLease(c *Claims, attempt string, rec claimRecord, rev uint64) *Lease {
	return &Lease{c: c, attempt: attempt, epoch: rec.Epoch, rec: rec, rev: rev}
}

// Epoch is the fencing token of this hold.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Acquire takes the attempt for worker: a new claim at epoch 1, or at the
// next epoch one that its holder released or that was held under the same
// worker id (a restarted worker). A claim whose holder went silent is not
// taken over: the controller declares that attempt lost (RevokeLapsed) and
// its task retries by policy, as a new attempt. Compare-and-set makes one
// caller win.
func (c *Claims) Acquire(ctx context.Context, attempt, worker string) (*Lease, error) {
	return c.acquire(ctx, attempt, worker, false)
}

// AcquireOrTakeOver is Acquire that also takes over a claim not renewed for
// a lease. It is for work nobody declares lost — building an integration
// branch — which the next delivery simply does again.
func (c *Claims) AcquireOrTakeOver(ctx context.Context, attempt, worker string) (*Lease, error) {
	return c.acquire(ctx, attempt, worker, true)
}

func (c *Claims) acquire(ctx context.Context, attempt, worker string, takeOverStale bool) (*Lease, error) {
	// Nearly every claim is its attempt's first: create it, and read
	// what is there only when something is (one round trip of the two
	// saved on the claim's path).
	rec := claimRecord{Worker: worker, Epoch: 1, State: claimRunning}
	rev, err := c.kv.Create(ctx, attempt, mustJSON(rec))
	if err == nil {
		return newLease(c, attempt, rec, rev), nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("queue: claim %s: %w", attempt, err)
	}
	e, err := c.kv.Get(ctx, attempt)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrHeld // deleted since: whoever did decides; the job comes back
	}
	if err != nil {
		return nil, fmt.Errorf("queue: read claim %s: %w", attempt, err)
	}
	var prev claimRecord
	if err := json.Unmarshal(e.Value(), &prev); err != nil {
		prev = claimRecord{State: claimReleased} // an unreadable claim protects nothing
	}
	switch {
	case prev.State == claimFinished || prev.State == claimLost:
		return nil, ErrFinished
	case prev.State == claimRunning && prev.Worker != worker:
		if !takeOverStale || c.now().Sub(e.Created()) < c.lease {
			return nil, ErrHeld
		}
	}
	rec = claimRecord{Worker: worker, Epoch: prev.Epoch + 1, State: claimRunning}
	rev, err = c.kv.Update(ctx, attempt, mustJSON(rec), e.Revision())
	if err != nil {
		if IsConditionFailed(err) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("queue: take over claim %s: %w", attempt, err)
	}
	return newLease(c, attempt, rec, rev), nil
}

// Revoke makes sure no worker will ever run an attempt again: the attempt's
// claim is marked finished, so Acquire refuses it and a holder's next Renew
// is superseded. It returns ErrHeld while a live worker holds the attempt
// (that worker must be told to stop instead), and nil when the attempt was
// already finished.
func (c *Claims) Revoke(ctx context.Context, attempt string) error {
	rec := claimRecord{Worker: "controller", State: claimFinished}
	e, err := c.kv.Get(ctx, attempt)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		_, err := c.kv.Create(ctx, attempt, mustJSON(rec))
		if IsConditionFailed(err) {
			return ErrHeld // claimed just now; the caller tries again
		}
		if err != nil {
			return fmt.Errorf("queue: revoke %s: %w", attempt, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("queue: read claim %s: %w", attempt, err)
	}
	var prev claimRecord
	_ = json.Unmarshal(e.Value(), &prev)
	switch {
	case prev.State == claimFinished || prev.State == claimLost:
		return nil
	case prev.State == claimRunning && c.now().Sub(e.Created()) < c.lease:
		return ErrHeld
	}
	rec.Epoch = prev.Epoch + 1
	if _, err := c.kv.Update(ctx, attempt, mustJSON(rec), e.Revision()); err != nil {
		if IsConditionFailed(err) {
			return ErrHeld
		}
		return fmt.Errorf("queue: revoke %s: %w", attempt, err)
	}
	return nil
}

// Renew proves the holder is alive. It fails with ErrSuperseded when another
// worker took the attempt over or the controller declared it lost. It
// rewrites the claim in its current state, so a renewal racing Finish or
// Release never undoes them.
func (l *Lease) Renew(ctx context.Context) error { return l.write(ctx, "") }

// Finish marks the attempt reported, so later deliveries of its job are acked
// without running.
func (l *Lease) Finish(ctx context.Context) error { return l.write(ctx, claimFinished) }

// Release hands the attempt back unfinished (a worker shutting down), so the
// next delivery may take it over at once instead of waiting out the lease.
func (l *Lease) Release(ctx context.Context) error { return l.write(ctx, claimReleased) }

// write stores the claim with state (or its current state if ""), on top of
// the revision this lease last wrote.
func (l *Lease) write(ctx context.Context, state string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	if state != "" {
		rec.State = state
	}
	rev, err := l.c.kv.Update(ctx, l.attempt, mustJSON(rec), l.rev)
	if err != nil && IsConditionFailed(err) {
		// A write of ours whose reply was lost (a client timeout under load,
		// a reconnect) may have landed all the same, moving the revision on
		// without us. If the claim still holds what this lease wrote, it is
		// ours: write again on top of it. Anything else — another epoch, a
		// takeover, the controller's revocation — supersedes us.
		var e jetstream.KeyValueEntry
		if e, err = l.c.kv.Get(ctx, l.attempt); err == nil {
			var cur claimRecord
			if json.Unmarshal(e.Value(), &cur) == nil && l.ours(cur) {
				rev, err = l.c.kv.Update(ctx, l.attempt, mustJSON(rec), e.Revision())
			} else {
				return fmt.Errorf("%w: %s at epoch %d", ErrSuperseded, l.attempt, l.epoch)
			}
		}
	}
	if err != nil {
		if IsConditionFailed(err) {
			return fmt.Errorf("%w: %s at epoch %d", ErrSuperseded, l.attempt, l.epoch)
		}
		return fmt.Errorf("queue: write claim %s: %w", l.attempt, err)
	}
	l.rev, l.rec = rev, rec
	return nil
}

// ours reports whether a stored claim is one this lease wrote: its worker,
// its epoch, a state only the holder writes. The controller's revocations
// are never ours: a lost claim keeps the holder's name but not its say.
func (l *Lease) ours(cur claimRecord) bool {
	switch cur.State {
	case claimRunning, claimReleased, claimFinished:
		return cur.Worker == l.rec.Worker && cur.Epoch == l.epoch
	}
	return false
}

// IsConditionFailed reports whether a conditional write failed on its
// condition: a KV create of a key that exists, an update on a revision that
// is not the last, a publish expecting another last sequence. Someone else
// wrote first.
func IsConditionFailed(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return true
		}
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are encoded here
	}
	return b
}
