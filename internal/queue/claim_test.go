package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/nats-io/nats.go/jetstream"
)

const testLease = 30 * time.Second

func claimsFor(t testing.TB, js jetstream.JetStream, clk *fakeClock) *Claims {
	t.Helper()
	var now func() time.Time
	if clk != nil {
		now = clk.Now
	}
	c, err := NewClaims(testCtx(t), js, testLease, now)
	if err != nil {
		t.Fatalf("NewClaims: %v", err)
	}
	return c
}

// claimEntry reads the claim as stored.
func claimEntry(t testing.TB, c *Claims, attempt string) (jetstream.KeyValueEntry, claimRecord) {
	t.Helper()
	e, err := c.kv.Get(testCtx(t), attempt)
	if err != nil {
		t.Fatalf("read claim %s: %v", attempt, err)
	}
	var rec claimRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatalf("claim %s: %v", attempt, err)
	}
	return e, rec
}

// expire pins the clock where the claim's last write is exactly one lease
// old: that claim is stale, while any claim written after it is still fresh.
// This is what a real clock does after a lease of silence, without the wait.
func expire(t testing.TB, c *Claims, clk *fakeClock, attempt string) {
	t.Helper()
	e, _ := claimEntry(t, c, attempt)
	clk.Set(e.Created().Add(testLease))
}

func acquire(t testing.TB, c *Claims, attempt, worker string, wantEpoch uint64) *Lease {
	t.Helper()
	l, err := c.Acquire(testCtx(t), attempt, worker)
	if err != nil {
		t.Fatalf("%s Acquire %s: %v", worker, attempt, err)
	}
	if l.Epoch() != wantEpoch {
		t.Fatalf("%s got epoch %d, want %d", worker, l.Epoch(), wantEpoch)
	}
	return l
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func TestNewClaimsNeedsBucket(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	_, js := connect(t, ns)
	if _, err := NewClaims(testCtx(t), js, testLease, nil); err == nil {
		t.Fatal("NewClaims without the bucket succeeded")
	}
}

func TestClaimLifecycle(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	clk := &fakeClock{}
	c := claimsFor(t, js, clk)
	const a = "f1_t1_1"

	l1 := acquire(t, c, a, "w1", 1)
	if _, rec := claimEntry(t, c, a); rec != (claimRecord{Worker: "w1", Epoch: 1, State: claimRunning}) {
		t.Errorf("stored claim %+v", rec)
	}
	_, err := c.Acquire(ctx, a, "w2")
	wantErr(t, "second worker on a fresh claim", err, ErrHeld)

	// One nanosecond before the lease runs out the claim is still held.
	e, _ := claimEntry(t, c, a)
	clk.Set(e.Created().Add(testLease - time.Nanosecond))
	_, err = c.Acquire(ctx, a, "w2")
	wantErr(t, "second worker just inside the lease", err, ErrHeld)

	// w1 goes silent for a lease. An attempt's claim is not taken over by
	// whoever gets the job next: the controller declares the attempt lost.
	expire(t, c, clk, a)
	_, err = c.Acquire(ctx, a, "w2")
	wantErr(t, "Acquire of a stale claim", err, ErrHeld)
	// Work nobody declares lost (an integration build) is taken over.
	l2, err := c.AcquireOrTakeOver(ctx, a, "w2")
	if err != nil || l2.Epoch() != 2 {
		t.Fatalf("AcquireOrTakeOver of a stale claim: %v", err)
	}
	if _, rec := claimEntry(t, c, a); rec != (claimRecord{Worker: "w2", Epoch: 2, State: claimRunning}) {
		t.Errorf("stored claim after takeover %+v", rec)
	}
	// The takeover is fresh: a third worker is refused at the same instant.
	_, err = c.AcquireOrTakeOver(ctx, a, "w3")
	wantErr(t, "third worker after a takeover", err, ErrHeld)

	// w1 wakes up: whatever it tries fails and leaves w2's claim alone.
	wantErr(t, "superseded Renew", l1.Renew(ctx), ErrSuperseded)
	wantErr(t, "superseded Finish", l1.Finish(ctx), ErrSuperseded)
	wantErr(t, "superseded Release", l1.Release(ctx), ErrSuperseded)
	if _, rec := claimEntry(t, c, a); rec != (claimRecord{Worker: "w2", Epoch: 2, State: claimRunning}) {
		t.Errorf("a superseded holder changed the claim to %+v", rec)
	}

	if err := l2.Renew(ctx); err != nil {
		t.Fatalf("holder Renew: %v", err)
	}
	if err := l2.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if _, rec := claimEntry(t, c, a); rec != (claimRecord{Worker: "w2", Epoch: 2, State: claimFinished}) {
		t.Errorf("finished claim %+v", rec)
	}
	// A finished attempt is never run again, however late the duplicate.
	clk.Set(time.Now().Add(365 * 24 * time.Hour))
	for _, w := range []string{"w1", "w2", "w3"} {
		_, err := c.Acquire(ctx, a, w)
		wantErr(t, w+" Acquire of a finished attempt", err, ErrFinished)
	}
}

func TestRenewKeepsClaim(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	clk := &fakeClock{}
	c := claimsFor(t, js, clk)
	const a = "f1_t1_1"

	l := acquire(t, c, a, "w1", 1)
	before, _ := claimEntry(t, c, a)
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	after, rec := claimEntry(t, c, a)
	if after.Revision() <= before.Revision() || !after.Created().After(before.Created()) {
		t.Fatalf("Renew did not rewrite the claim: revision %d→%d", before.Revision(), after.Revision())
	}
	if rec != (claimRecord{Worker: "w1", Epoch: 1, State: claimRunning}) {
		t.Errorf("Renew changed the claim to %+v", rec)
	}
	// A lease after the acquisition, but not after the renewal: still held.
	clk.Set(before.Created().Add(testLease))
	_, err := c.Acquire(ctx, a, "w2")
	wantErr(t, "Acquire of a renewed claim", err, ErrHeld)
	// Renew works repeatedly (the lease tracks the new revision).
	for range 3 {
		if err := l.Renew(ctx); err != nil {
			t.Fatalf("repeated Renew: %v", err)
		}
	}
}

func TestReleaseHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, &fakeClock{}) // real time: the lease is fresh throughout
	const a = "f1_t1_1"

	l1 := acquire(t, c, a, "w1", 1)
	if err := l1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, rec := claimEntry(t, c, a); rec.State != claimReleased || rec.Epoch != 1 {
		t.Errorf("released claim %+v", rec)
	}
	l2 := acquire(t, c, a, "w2", 2)
	wantErr(t, "Renew after another took over", l1.Renew(ctx), ErrSuperseded)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The releasing worker itself may take it back, also at a new epoch.
	acquire(t, c, a, "w2", 3)
}

// A worker restarted with a fixed id finds its own running claim: it takes
// it over at a higher epoch, and the lease of its previous life is fenced off.
func TestSameWorkerReacquiresAtHigherEpoch(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, &fakeClock{})
	const a = "f1_t1_1"

	old := acquire(t, c, a, "w1", 1)
	restarted := acquire(t, c, a, "w1", 2)
	wantErr(t, "Renew of the previous life", old.Renew(ctx), ErrSuperseded)
	if err := restarted.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.Acquire(ctx, a, "w2")
	wantErr(t, "other worker", err, ErrHeld)
}

func TestConcurrentTakeoverHasOneWinner(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	clk := &fakeClock{}
	c := claimsFor(t, js, clk)

	for round := range 3 {
		a := drovertype.AttemptID("f1", "t1", round+1)
		acquire(t, c, a, "dead", 1)
		expire(t, c, clk, a)

		const n = 10
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			leases = make([]*Lease, n)
			errs   = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = c.AcquireOrTakeOver(ctx, a, fmt.Sprintf("w%d", i))
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i := range n {
			switch {
			case errs[i] == nil:
				if winner >= 0 {
					t.Fatalf("round %d: w%d and w%d both won the claim", round, winner, i)
				}
				winner = i
			case !errors.Is(errs[i], ErrHeld):
				t.Fatalf("round %d: loser w%d got %v, want ErrHeld", round, i, errs[i])
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody took over the stale claim", round)
		}
		if leases[winner].Epoch() != 2 {
			t.Errorf("round %d: winner epoch %d, want 2", round, leases[winner].Epoch())
		}
		if _, rec := claimEntry(t, c, a); rec.Worker != fmt.Sprintf("w%d", winner) || rec.Epoch != 2 {
			t.Errorf("round %d: stored %+v, winner w%d", round, rec, winner)
		}
	}
}

func TestConcurrentFirstAcquireHasOneWinner(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	c := claimsFor(t, js, nil)
	const n = 10
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = c.Acquire(testCtx(t), "f1_t1_1", fmt.Sprintf("w%d", i))
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrHeld):
			t.Errorf("w%d: %v, want ErrHeld", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d workers claimed a new attempt, want 1", won)
	}
}

// The worker renews from its heartbeat goroutine while the attempt's own
// goroutine finishes or releases the lease.
func TestLeaseConcurrentRenewAndFinish(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, nil)

	for i := range 5 {
		a := drovertype.AttemptID("f1", "t1", i+1)
		l := acquire(t, c, a, "w1", 1)
		var wg sync.WaitGroup
		renewErrs := make(chan error, 20)
		wg.Go(func() {
			for range 20 {
				renewErrs <- l.Renew(ctx)
			}
		})
		var end error
		if i%2 == 0 {
			end = l.Finish(ctx)
		} else {
			end = l.Release(ctx)
		}
		wg.Wait()
		close(renewErrs)
		if end != nil {
			t.Fatalf("Finish/Release racing a heartbeat: %v", end)
		}
		for err := range renewErrs {
			if err != nil {
				t.Fatalf("Renew racing Finish/Release: %v", err)
			}
		}
		want := claimFinished
		if i%2 == 1 {
			want = claimReleased
		}
		if _, rec := claimEntry(t, c, a); rec.State != want || rec.Epoch != 1 {
			t.Fatalf("claim after racing heartbeat: %+v, want state %s", rec, want)
		}
	}
}

func TestUnreadableClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, nil)
	const a = "f1_t1_1"
	if _, err := c.kv.Put(ctx, a, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(ctx, a, "w1")
	if err != nil {
		t.Fatalf("Acquire over an unreadable claim: %v", err)
	}
	if l.Epoch() < 1 {
		t.Errorf("epoch %d", l.Epoch())
	}
}

// A silent holder's claim is ended by the controller: nobody runs the
// attempt again, and the holder, if it wakes up, is superseded.
func TestRevokeLapsed(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, nil)
	const a = "f1_t1_1"

	holder := acquire(t, c, a, "w1", 1)
	seen, _ := claimEntry(t, c, a)

	// A renewal after the controller looked wins: the revocation is refused.
	if err := holder.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.RevokeLapsed(ctx, a, seen.Revision())
	wantErr(t, "RevokeLapsed after a renewal", err, ErrHeld)

	// Silence since the revision the controller saw: revoked.
	seen, _ = claimEntry(t, c, a)
	info, err := c.RevokeLapsed(ctx, a, seen.Revision())
	if err != nil {
		t.Fatalf("RevokeLapsed: %v", err)
	}
	if info.Worker != "w1" || info.Epoch != 1 || !info.Lost() {
		t.Errorf("revoked claim %+v, want w1's at epoch 1, lost", info)
	}
	// Again (a controller that crashed before recording the loss): the
	// same claim, so the same event id.
	again, err := c.RevokeLapsed(ctx, a, seen.Revision())
	if err != nil || *again != *info {
		t.Errorf("RevokeLapsed again: %+v, %v; want %+v", again, err, info)
	}
	wantErr(t, "holder Renew after the loss", holder.Renew(ctx), ErrSuperseded)
	wantErr(t, "holder Finish after the loss", holder.Finish(ctx), ErrSuperseded)
	for _, w := range []string{"w1", "w2"} {
		_, err := c.Acquire(ctx, a, w)
		wantErr(t, w+" Acquire of a lost attempt", err, ErrFinished)
	}
	// Revoking for a cancel after the loss changes nothing.
	if err := c.Revoke(ctx, a); err != nil {
		t.Errorf("Revoke of a lost claim: %v", err)
	}

	// Finished claims are not lost, whatever revision is named.
	const b = "f1_t2_1"
	lb := acquire(t, c, b, "w2", 1)
	if err := lb.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	fin, _ := claimEntry(t, c, b)
	_, err = c.RevokeLapsed(ctx, b, fin.Revision())
	wantErr(t, "RevokeLapsed of a finished claim", err, ErrHeld)
}

func TestWatchClaims(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, nil)
	held := acquire(t, c, "f1_t1_1", "w1", 1)
	done := acquire(t, c, "f1_t2_1", "w2", 1)
	if err := done.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() *ClaimInfo {
		t.Helper()
		select {
		case info, ok := <-w.Updates():
			if !ok {
				t.Fatal("watch closed")
			}
			return info
		case <-ctx.Done():
			t.Fatal("no update")
		}
		return nil
	}
	// The current claims first, then the marker.
	got := map[string]string{}
	for info := next(); info != nil; info = next() {
		got[info.Attempt] = fmt.Sprintf("%s@%d %s", info.Worker, info.Epoch, info.State)
	}
	want := map[string]string{"f1_t1_1": "w1@1 running", "f1_t2_1": "w2@1 finished"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("current claims %v, want %v", got, want)
	}
	// Then each write: a renewal (a new revision), a release.
	before, _ := claimEntry(t, c, "f1_t1_1")
	if err := held.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if info := next(); info.Attempt != "f1_t1_1" || !info.Running() || info.Revision <= before.Revision() {
		t.Errorf("renewal seen as %+v", info)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info := next(); info.Running() || info.State != "released" {
		t.Errorf("release seen as %+v", info)
	}
}

// A renewal whose reply is lost (a client timeout under load) may still land
// on the server. The holder's next write finds the revision moved on by its
// own record and carries on; a record anyone else wrote still supersedes it.
func TestLeaseSurvivesItsOwnLostReply(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := claimsFor(t, js, nil)
	const a = "f1_t1_1"
	l := acquire(t, c, a, "w1", 1)
	landed := func() {
		t.Helper()
		e, _ := claimEntry(t, c, a)
		if _, err := c.kv.Update(ctx, a, e.Value(), e.Revision()); err != nil {
			t.Fatal(err)
		}
	}
	landed() // the write the lease never heard back from
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew after its own write landed unseen: %v", err)
	}
	landed()
	if err := l.Finish(ctx); err != nil {
		t.Fatalf("Finish after its own write landed unseen: %v", err)
	}
	if _, rec := claimEntry(t, c, a); rec != (claimRecord{Worker: "w1", Epoch: 1, State: claimFinished}) {
		t.Errorf("claim %+v", rec)
	}

	// The controller's revocation keeps the holder's name and epoch: it is
	// not the holder's own write.
	const b = "f1_t2_1"
	lb := acquire(t, c, b, "w1", 1)
	seen, _ := claimEntry(t, c, b)
	if _, err := c.RevokeLapsed(ctx, b, seen.Revision()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Renew after a revocation", lb.Renew(ctx), ErrSuperseded)
}
