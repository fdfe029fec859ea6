package leadership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// Key is the lease's key in the drover-leader bucket.
const Key = "leader"

// Errors of a campaign and of a term.
var (
	// ErrHeld means another controller holds the lease: a *HeldError
	// names it.
	ErrHeld = errors.New("leadership: the lease is held by another controller")
	// ErrLost means a renewal was refused: the lease is no longer the
	// term's (it lapsed and was won again, or was deleted).
	ErrLost = errors.New("leadership: lease lost")
	// ErrDeadline means the term's deadline passed before a renewal
	// succeeded: the holder was too slow (paused, cut off) to know it
	// still holds the lease.
	ErrDeadline = errors.New("leadership: the term's deadline passed")
	// ErrResigned ends a term its holder handed over.
	ErrResigned = errors.New("leadership: resigned")
)

// HeldError names who holds the lease.
type HeldError struct{ By string }

func (e *HeldError) Error() string { return fmt.Sprintf("%v: %s", ErrHeld, e.By) }
func (e *HeldError) Unwrap() error { return ErrHeld }

// Record is the lease's value.
type Record struct {
	// Controller is the holder's id.
	Controller string `json:"controller"`
	// Since is when the holder's term began, on its clock (for people).
	Since time.Time `json:"since"`
}

// maxRecord bounds a lease value read back: anyone who may write the
// bucket can put anything there.
const maxRecord = 4 << 10

// decodeRecord reads a lease value. One that does not decode, or names no
// valid controller, is held by nobody this build can name: it still counts
// as held until it lapses.
func decodeRecord(raw []byte) (Record, error) {
	var r Record
	if len(raw) > maxRecord {
		return r, fmt.Errorf("leadership: lease value of %d bytes", len(raw))
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Record{}, fmt.Errorf("leadership: lease value: %w", err)
	}
	if err := drovertype.ValidID(r.Controller); err != nil {
		return Record{}, fmt.Errorf("leadership: lease value: controller: %w", err)
	}
	return r, nil
}

// Options configure a Lease.
type Options struct {
	// ID is this controller's id; required.
	ID string
	// TTL is how long the lease lives unrenewed. Defaults to 3s; at least 1s
	// (the server's per-message TTLs count whole seconds).
	TTL time.Duration
	// Now is the clock the deadline is kept on; it must carry Go's
	// monotonic reading, as time.Now does. Defaults to time.Now.
	Now func() time.Time
}

// DefaultTTL is Options.TTL's default.
const DefaultTTL = 3 * time.Second

// Lease is this controller's handle on the leader lease.
type Lease struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	subject string
	id      string
	ttl     time.Duration
	now     func() time.Time
}

// Open opens the lease in the drover-leader bucket, which queue.Ensure
// creates.
func Open(ctx context.Context, js jetstream.JetStream, o Options) (*Lease, error) {
	if err := drovertype.ValidID(o.ID); err != nil {
		return nil, fmt.Errorf("leadership: controller id: %w", err)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < time.Second {
		return nil, fmt.Errorf("leadership: lease TTL %s is under 1s", o.TTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	kv, err := js.KeyValue(ctx, queue.LeaderBucket)
	if err != nil {
		return nil, fmt.Errorf("leadership: open %s: %w", queue.LeaderBucket, err)
	}
	return &Lease{js: js, kv: kv, subject: "$KV." + queue.LeaderBucket + "." + Key, id: o.ID, ttl: o.TTL, now: o.Now}, nil
}

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// ID is this controller's id.
func (l *Lease) ID() string { return l.id }

// Holder reads who holds the lease now: "" when nobody does.
func (l *Lease) Holder(ctx context.Context) (string, error) { return holder(ctx, l.kv) }

// Holder reads who holds the lease in js's drover-leader bucket: "" when
// nobody does, "?" when its value names nobody this build can read.
func Holder(ctx context.Context, js jetstream.JetStream) (string, error) {
	kv, err := js.KeyValue(ctx, queue.LeaderBucket)
	if err != nil {
		return "", fmt.Errorf("leadership: open %s: %w", queue.LeaderBucket, err)
	}
	return holder(ctx, kv)
}

func holder(ctx context.Context, kv jetstream.KeyValue) (string, error) {
	e, err := kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("leadership: read lease: %w", err)
	}
	r, err := decodeRecord(e.Value())
	if err != nil {
		return "?", nil
	}
	return r.Controller, nil
}

// Campaign tries once to take the lease: it creates the key when nobody
// holds it, and takes it over when it names this controller (left by this
// controller's previous term or process: the data dir's lock keeps two
// processes from sharing an id on one host). It returns the term it won,
// or an error matching ErrHeld.
func (l *Lease) Campaign(ctx context.Context) (*Term, error) {
	e, err := l.kv.Get(ctx, Key)
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("leadership: read lease: %w", err)
	default:
		r, derr := decodeRecord(e.Value())
		if derr != nil {
			return nil, &HeldError{By: "?"}
		}
		if r.Controller != l.id {
			return nil, &HeldError{By: r.Controller}
		}
		rev = e.Revision()
	}
	sent := l.now()
	val, err := json.Marshal(Record{Controller: l.id, Since: sent.UTC().Round(0)})
	if err != nil {
		return nil, fmt.Errorf("leadership: encode lease: %w", err)
	}
	if rev == 0 {
		rev, err = l.kv.Create(ctx, Key, val, jetstream.KeyTTL(l.ttl))
	} else {
		rev, err = l.write(ctx, val, rev)
	}
	if err != nil {
		if queue.IsConditionFailed(err) {
			return nil, &HeldError{By: "another controller, just now"}
		}
		return nil, fmt.Errorf("leadership: campaign: %w", err)
	}
	return &Term{l: l, rev: rev, val: val, deadline: l.deadline(sent), done: make(chan struct{})}, nil
}

// write puts val on the lease key on condition that rev is its last
// revision, with the lease's TTL (which KeyValue.Update cannot carry).
func (l *Lease) write(ctx context.Context, val []byte, rev uint64) (uint64, error) {
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subject, Data: val, Header: nats.Header{}},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.ttl))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// deadline is when a term whose write was sent at sent stops acting: a
// tenth of the TTL before the lease, which the server counts from when it
// stored the write (no earlier than sent), can lapse.
func (l *Lease) deadline(sent time.Time) time.Time { return sent.Add(l.ttl - l.ttl/10) }

// Term is one tenure of the lease. It is safe for concurrent use: the
// Elector renews it while the leader's work asks whether it may act.
type Term struct {
	l    *Lease
	val  []byte
	done chan struct{}

	mu       sync.Mutex
	rev      uint64
	deadline time.Time
	err      error // why it ended; nil while it lasts
}

// Valid reports whether the term's holder may act now: the term has not
// ended and its deadline has not passed. Check it right before every
// write that only a leader may make.
func (t *Term) Valid() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil && !t.l.now().Before(t.deadline) {
		t.endLocked(ErrDeadline)
	}
	return t.err == nil
}

// Deadline is when the term ends unless renewed.
func (t *Term) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// Done is closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.done }

// Err says why the term ended; nil while it lasts.
func (t *Term) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// End ends the term with cause (if it has not ended), without touching the
// lease: its holder stops acting now.
func (t *Term) End(cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endLocked(cause)
}

func (t *Term) endLocked(cause error) {
	if t.err == nil {
		t.err = cause
		close(t.done)
	}
}

// Renew writes the lease again on its last revision, and moves the
// deadline to the TTL (less a tenth) after the write was sent. A term that
// has ended, or whose deadline passed, is not renewed: it stays ended. A
// renewal that fails, whatever the reason, ends the term: its holder can no
// longer tell that the lease is still its own.
func (t *Term) Renew(ctx context.Context) error {
	if !t.Valid() {
		return t.Err()
	}
	t.mu.Lock()
	rev, deadline := t.rev, t.deadline
	t.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := t.l.now()
	next, err := t.l.write(ctx, t.val, rev)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil && queue.IsConditionFailed(err):
		t.endLocked(fmt.Errorf("%w: %w", ErrLost, err))
	case err != nil && ctx.Err() != nil && !t.l.now().Before(deadline):
		t.endLocked(ErrDeadline)
	case err != nil:
		t.endLocked(fmt.Errorf("%w: renewal failed: %w", ErrLost, err))
	case t.err == nil:
		t.rev, t.deadline = next, t.l.deadline(sent)
	}
	return t.err
}

// Resign ends the term and deletes the lease if it is still the term's, so
// that another controller takes over at once rather than after the TTL.
func (t *Term) Resign(ctx context.Context) error {
	t.mu.Lock()
	t.endLocked(ErrResigned)
	rev := t.rev
	t.mu.Unlock()
	err := t.l.kv.Delete(ctx, Key, jetstream.LastRevision(rev))
	if err != nil && !queue.IsConditionFailed(err) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("leadership: resign: %w", err)
	}
	return nil
}
