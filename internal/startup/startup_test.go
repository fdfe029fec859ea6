package startup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSleep records the waits asked for and returns at once, or the error
// of a context that ended.
type fakeSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	return ctx.Err()
}

// logged is a Waiter's log as text lines.
type logged struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logged) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logged) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

func newWaiter(b Backoff, rnd float64) (*Waiter, *fakeSleep, *logged) {
	fs, lg := &fakeSleep{}, &logged{}
	log := slog.New(slog.NewTextHandler(lg, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	return New(log, Options{Backoff: b, Sleep: fs.sleep, Rand: func() float64 { return rnd }}), fs, lg
}

// failing returns a try that fails with the given errors in turn, then
// succeeds.
func failing(errs ...error) (func(context.Context) error, *int) {
	n := 0
	return func(context.Context) error {
		n++
		if n <= len(errs) {
			return errs[n-1]
		}
		return nil
	}, &n
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

func TestWaitBacksOffExponentiallyUpToTheCap(t *testing.T) {
	w, fs, _ := newWaiter(Backoff{}, 0) // no jitter drawn
	try, n := failing(repeat(errors.New("connection refused"), 10)...)
	if err := w.Wait(context.Background(), "NATS", try); err != nil {
		t.Fatal(err)
	}
	if *n != 11 {
		t.Fatalf("tried %d times, want 11", *n)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 5000 * ms, 5000 * ms}
	if !slices.Equal(fs.waits, want) {
		t.Fatalf("waits %v, want %v", fs.waits, want)
	}
}

func TestWaitJitterNeverExceedsTheCap(t *testing.T) {
	for _, rnd := range []float64{0, 0.25, 0.999999} {
		w, fs, _ := newWaiter(Backoff{Initial: time.Second, Max: 4 * time.Second, Jitter: 0.5}, rnd)
		try, _ := failing(repeat(errors.New("no leader"), 6)...)
		if err := w.Wait(context.Background(), "JetStream", try); err != nil {
			t.Fatal(err)
		}
		base := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		for i, d := range fs.waits {
			if d > base[i] || d < base[i]/2 {
				t.Errorf("rand %v: wait %d is %v, want within [%v, %v]", rnd, i, d, base[i]/2, base[i])
			}
			if want := base[i] - time.Duration(0.5*rnd*float64(base[i])); d != want {
				t.Errorf("rand %v: wait %d is %v, want %v", rnd, i, d, want)
			}
		}
	}
}

func TestWaitLogsOncePerReason(t *testing.T) {
	w, _, lg := newWaiter(Backoff{}, 0)
	refused, noLeader := errors.New("connection refused"), errors.New("JetStream system temporarily unavailable")
	errs := append(append(repeat(refused, 5), repeat(noLeader, 4)...), refused)
	try, _ := failing(errs...)
	if err := w.Wait(context.Background(), "NATS", try); err != nil {
		t.Fatal(err)
	}
	lines := lg.lines()
	want := []string{
		`level=WARN msg="waiting for NATS" reason="connection refused"`,
		`level=WARN msg="still waiting for NATS" reason="JetStream system temporarily unavailable" waited=`,
		`level=WARN msg="still waiting for NATS" reason="connection refused" waited=`,
		`level=INFO msg="NATS ready" waited=`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d: %q, want prefix %q", i, lines[i], want[i])
		}
	}
	if !strings.HasSuffix(lines[3], "tries=11") {
		t.Errorf("ready line %q does not count 11 tries", lines[3])
	}
}

func TestWaitSucceedingAtOnceLogsNothing(t *testing.T) {
	w, fs, lg := newWaiter(Backoff{}, 0)
	if err := w.Wait(context.Background(), "NATS", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(fs.waits) != 0 || lg.lines()[0] != "" {
		t.Fatalf("waits %v, log %q", fs.waits, lg.lines())
	}
}

func TestWaitReturnsAFatalErrorAtOnce(t *testing.T) {
	w, fs, _ := newWaiter(Backoff{}, 0)
	refused := errors.New("authorization violation")
	try, n := failing(errors.New("connection refused"), Fatal(refused), errors.New("never tried"))
	err := w.Wait(context.Background(), "NATS", try)
	if !errors.Is(err, refused) || !IsFatal(err) || err.Error() != refused.Error() {
		t.Fatalf("err = %v, want the fatal %v as is", err, refused)
	}
	if *n != 2 || len(fs.waits) != 1 {
		t.Fatalf("%d tries and %d waits, want 2 and 1", *n, len(fs.waits))
	}
	if got := w.Check(context.Background()); got == nil || !strings.Contains(got.Error(), "authorization violation") {
		t.Fatalf("Check = %v, want the fatal error", got)
	}
	if Fatal(nil) != nil || IsFatal(errors.New("x")) || IsFatal(nil) {
		t.Fatal("Fatal(nil) or IsFatal of an unmarked error")
	}
}

func TestWaitStopsWhenTheContextEnds(t *testing.T) {
	t.Run("while sleeping", func(t *testing.T) {
		// A real timer of an hour: Wait must return when ctx ends, not then.
		w := New(nil, Options{Backoff: Backoff{Initial: time.Hour, Max: time.Hour}})
		ctx, cancel := context.WithCancelCause(context.Background())
		tried := make(chan struct{}, 1)
		go func() {
			<-tried
			cancel(errors.New("SIGTERM"))
		}()
		err := w.Wait(ctx, "NATS", func(context.Context) error {
			select {
			case tried <- struct{}{}:
			default:
			}
			return errors.New("connection refused")
		})
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "SIGTERM") || !strings.Contains(err.Error(), "NATS") {
			t.Fatalf("err = %v, want ErrStopped with the cause and the step", err)
		}
		if got := w.Check(ctx); got == nil || got.Error() != "stopping" {
			t.Fatalf("Check = %v, want stopping", got)
		}
	})
	t.Run("while trying", func(t *testing.T) {
		w, fs, _ := newWaiter(Backoff{}, 0)
		ctx, cancel := context.WithCancel(context.Background())
		err := w.Wait(ctx, "JetStream", func(tctx context.Context) error {
			cancel()
			<-tctx.Done() // a request cut short by the stop
			return tctx.Err()
		})
		if !errors.Is(err, ErrStopped) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrStopped and context.Canceled", err)
		}
		if len(fs.waits) != 0 {
			t.Fatalf("waited %v after the stop", fs.waits)
		}
	})
	t.Run("before the first try", func(t *testing.T) {
		w, _, _ := newWaiter(Backoff{}, 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := w.Wait(ctx, "NATS", func(ctx context.Context) error { return ctx.Err() })
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("err = %v, want ErrStopped", err)
		}
	})
}

func TestWaitBoundsEachTry(t *testing.T) {
	w, _, lg := newWaiter(Backoff{TryTimeout: 20 * time.Millisecond}, 0)
	var deadlines []time.Duration
	try := func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Fatal("try without a deadline")
		}
		deadlines = append(deadlines, time.Until(d))
		if len(deadlines) < 3 {
			<-ctx.Done() // a server that never answers
			return ctx.Err()
		}
		return nil
	}
	if err := w.Wait(context.Background(), "JetStream", try); err != nil {
		t.Fatalf("a try that timed out ended the wait: %v", err)
	}
	if !strings.Contains(lg.buf.String(), `reason="context deadline exceeded (no answer in 20ms)"`) {
		t.Errorf("the reason does not say how long the try waited:\n%s", lg.buf.String())
	}
	for _, d := range deadlines {
		if d > 20*time.Millisecond {
			t.Fatalf("try deadline %v away, want at most 20ms", d)
		}
	}
}

func TestCheckSaysWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	w := New(nil, Options{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err := w.Check(ctx); err == nil || err.Error() != "starting" {
		t.Fatalf("Check before any step = %v, want starting", err)
	}
	var first, during error
	tries := 0
	err := w.Wait(ctx, "JetStream", func(context.Context) error {
		tries++
		if tries == 1 {
			first = w.Check(ctx) // a first try may take its whole timeout
			return errors.New("no leader")
		}
		during = w.Check(ctx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if first == nil || first.Error() != "waiting for JetStream" {
		t.Fatalf("Check during the first try = %v", first)
	}
	if during == nil || during.Error() != "waiting for JetStream: no leader" {
		t.Fatalf("Check while waiting = %v", during)
	}
	if err := w.Check(ctx); err == nil || err.Error() != "starting" {
		t.Fatalf("Check between steps = %v, want starting", err)
	}
	w.Done()
	if err := w.Check(ctx); err != nil {
		t.Fatalf("Check after Done = %v", err)
	}
	_ = w.Wait(ctx, "NATS", func(context.Context) error { return nil })
	if err := w.Check(ctx); err != nil {
		t.Fatalf("a step after Done made the daemon unready: %v", err)
	}
}

func TestBackoffDefaults(t *testing.T) {
	b := Backoff{}.WithDefaults()
	want := Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2, Jitter: 0.5, TryTimeout: 10 * time.Second}
	if b != want {
		t.Fatalf("defaults %+v, want %+v", b, want)
	}
	if got := (Backoff{Jitter: 7, Multiplier: 0.5}).WithDefaults(); got.Jitter != 0.5 || got.Multiplier != 2 {
		t.Fatalf("out-of-range jitter or a shrinking multiplier kept: %+v", got)
	}
}

// TestWaitKeepsAFatalTimeoutAsIs: a try that timed out and was found fatal
// (a request the server's permissions dropped) is returned as it was.
func TestWaitKeepsAFatalTimeoutAsIs(t *testing.T) {
	w, _, _ := newWaiter(Backoff{TryTimeout: time.Millisecond}, 0)
	var fatal error
	err := w.Wait(context.Background(), "JetStream", func(ctx context.Context) error {
		<-ctx.Done()
		fatal = Fatal(fmt.Errorf("%w: permissions violation", ctx.Err()))
		return fatal
	})
	if err != fatal {
		t.Fatalf("err = %v, want %v as is", err, fatal)
	}
}
