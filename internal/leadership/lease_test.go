package leadership

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup is a real nats-server with Drover's layout, the leader bucket in it.
func setup(t testing.TB) jetstream.JetStream {
	t.Helper()
	_, js := natstest.Connect(t, natstest.RunServer(t, t.TempDir(), -1))
	if err := queue.Ensure(testCtx(t), js, queue.StreamOptions{}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return js
}

func open(t testing.TB, js jetstream.JetStream, id string, ttl time.Duration, now func() time.Time) *Lease {
	t.Helper()
	l, err := Open(testCtx(t), js, Options{ID: id, TTL: ttl, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCampaignAndRenew: one controller wins, the others are told who
// holds it; renewals move the deadline and keep the lease.
func TestCampaignAndRenew(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	a, b := open(t, js, "ctl-a", 30*time.Second, nil), open(t, js, "ctl-b", 30*time.Second, nil)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	if _, err := b.Campaign(ctx); !errors.As(err, &held) || held.By != "ctl-a" {
		t.Fatalf("b's campaign: %v, want held by ctl-a", err)
	}
	first := ta.Deadline()
	if !ta.Valid() || time.Until(first) < 20*time.Second {
		t.Fatalf("a's term: valid %v, deadline in %s", ta.Valid(), time.Until(first))
	}
	if err := ta.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if !ta.Deadline().After(first) {
		t.Error("a renewal did not move the deadline")
	}
	if h, err := b.Holder(ctx); err != nil || h != "ctl-a" {
		t.Errorf("holder %q, %v", h, err)
	}
}

// TestLapse: a lease nobody renews lapses on the server and another
// controller wins it; its holder had stopped acting by its own clock
// before that, so there is no moment when both may act.
func TestLapse(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	a, b := open(t, js, "ctl-a", time.Second, nil), open(t, js, "ctl-b", time.Second, nil)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tb *Term
	waitFor(t, 15*time.Second, "b to win the lapsed lease", func() bool {
		tb, err = b.Campaign(ctx)
		if err != nil && !errors.Is(err, ErrHeld) {
			t.Fatal(err)
		}
		return err == nil
	})
	if ta.Valid() {
		t.Fatal("a may still act after b won the lease")
	}
	if !errors.Is(ta.Err(), ErrDeadline) {
		t.Errorf("a's term ended with %v, want ErrDeadline", ta.Err())
	}
	// a's renewal comes too late: refused, whatever the server says.
	if err := ta.Renew(ctx); err == nil {
		t.Fatal("a renewed a term past its deadline")
	}
	if h, _ := b.Holder(ctx); h != "ctl-b" || !tb.Valid() {
		t.Fatalf("holder %q after a's late renewal", h)
	}
}

// TestRenewalRefused: a renewal on a revision that is no longer the
// lease's ends the term at once (ErrLost), before its deadline.
func TestRenewalRefused(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	a, b := open(t, js, "ctl-a", 30*time.Second, nil), open(t, js, "ctl-b", 30*time.Second, nil)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The lease is deleted behind a's back (an operator, a forger) and b
	// wins it.
	if err := b.kv.Delete(ctx, Key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ta.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("renewal: %v, want ErrLost", err)
	}
	select {
	case <-ta.Done():
	default:
		t.Fatal("the term did not end")
	}
	if ta.Valid() {
		t.Fatal("a term whose renewal was refused is still valid")
	}
	if h, _ := a.Holder(ctx); h != "ctl-b" {
		t.Errorf("holder %q, want ctl-b", h)
	}
}

// pausedClock is a clock that can jump, as a process's does when it was
// stopped (SIGSTOP, a long GC pause, a frozen VM) and runs again.
type pausedClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *pausedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *pausedClock) pause(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// TestPausedLeaderStops: a leader paused past its deadline stops acting the
// moment it runs again, by its own clock, though the server still keeps its
// lease (a long TTL here): it does not renew, and its next campaign is a
// new term.
func TestPausedLeaderStops(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	clk := &pausedClock{}
	a := open(t, js, "ctl-a", 10*time.Second, clk.now)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev := ta.rev
	clk.pause(9 * time.Second) // past the deadline (9s = TTL less a tenth), inside the TTL
	if ta.Valid() {
		t.Fatal("a paused leader may act past its deadline")
	}
	if err := ta.Renew(ctx); !errors.Is(err, ErrDeadline) {
		t.Fatalf("renewal after the pause: %v, want ErrDeadline", err)
	}
	e, err := a.kv.Get(ctx, Key)
	if err != nil || e.Revision() != rev {
		t.Fatalf("the lease was written after the deadline: %v", err)
	}
	next, err := a.Campaign(ctx)
	if err != nil || !next.Valid() || next.rev == rev {
		t.Fatalf("campaign again: %v", err)
	}
}

// TestResign: a resignation hands the lease over at once; a restarted
// process of the same controller takes its own lease over at once too.
// The TTL is long, so only these can explain a win inside the wait.
func TestResign(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	a, b := open(t, js, "ctl-a", time.Minute, nil), open(t, js, "ctl-b", time.Minute, nil)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if ta.Valid() || !errors.Is(ta.Err(), ErrResigned) {
		t.Fatalf("a resigned term: valid %v, err %v", ta.Valid(), ta.Err())
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatalf("b's campaign after a resigned: %v", err)
	}
	// A late resignation of a's term deletes nothing of b's.
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.Holder(ctx); h != "ctl-b" {
		t.Fatalf("holder %q after a's second resignation", h)
	}
	// b's process dies; it comes back (same id) and need not wait.
	_ = tb
	b2 := open(t, js, "ctl-b", time.Minute, nil)
	if _, err := b2.Campaign(ctx); err != nil {
		t.Fatalf("b's next process: %v", err)
	}
}

// TestLapseSeenByWatchers: a lapsed lease shows as a marker to the
// bucket's watchers (nats-server 2.11 and later, LimitMarkerTTL), so a
// standby campaigns at once; the timer is the fallback.
func TestLapseSeenByWatchers(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	a := open(t, js, "ctl-a", time.Second, nil)
	w, err := a.kv.Watch(ctx, Key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-w.Updates():
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				return
			}
		case <-ctx.Done():
			t.Fatal("no marker of the lapse reached the watcher")
		}
	}
}

// TestElector: two electors, one leads; when its lease is taken from it,
// its work's context ends; when it stops, it resigns and the other leads
// (the TTL is long: only a resignation explains it).
func TestElector(t *testing.T) {
	t.Parallel()
	js := setup(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	type run struct {
		cancel context.CancelFunc
		done   chan struct{}
		mu     sync.Mutex
		terms  int
		active bool
	}
	start := func(id string, ttl time.Duration) *run {
		l := open(t, js, id, ttl, nil)
		ctx, cancel := context.WithCancel(context.Background())
		r := &run{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			NewElector(l, log).Run(ctx, func(ctx context.Context, term *Term) {
				r.mu.Lock()
				r.terms++
				r.active = true
				r.mu.Unlock()
				<-ctx.Done()
				r.mu.Lock()
				r.active = false
				r.mu.Unlock()
			})
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	leading := func(r *run) bool { r.mu.Lock(); defer r.mu.Unlock(); return r.active }
	a := start("ctl-a", time.Minute)
	waitFor(t, 10*time.Second, "a to lead", func() bool { return leading(a) })
	b := start("ctl-b", time.Second)
	a.cancel()
	<-a.done
	waitFor(t, 10*time.Second, "b to lead after a resigned", func() bool { return leading(b) })
	if leading(a) {
		t.Fatal("a still leads after it stopped")
	}
	// The lease is taken from b (deleted and won by z, which does not
	// renew): b's next renewal is refused and its term's work stops.
	ctx := testCtx(t)
	z := open(t, js, "ctl-z", time.Minute, nil)
	if err := z.kv.Delete(ctx, Key); err != nil {
		t.Fatal(err)
	}
	if _, err := z.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "b's work to stop once its lease was taken", func() bool { return !leading(b) })
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.terms != 1 {
		t.Errorf("b had %d terms, want 1 (z holds the lease)", b.terms)
	}
}

// FuzzDecodeRecord: a lease value is outside input (anyone who may write
// the bucket); whatever it is, reading it neither panics nor names a
// holder that is not a valid id.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"controller":"ctl-a","since":"2025-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"controller":"a b"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeRecord(raw)
		if err == nil && r.Controller == "" {
			t.Fatalf("%q: a record naming nobody", raw)
		}
	})
}
