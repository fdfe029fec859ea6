package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func reg(id, pool string, notClaiming string, runtimes ...RuntimeHealth) *Registration {
	return &Registration{ID: id, Pool: pool, NotClaiming: notClaiming, Runtimes: runtimes}
}

func healthy(name string) RuntimeHealth { return RuntimeHealth{Name: name, Healthy: true} }
func broken(name, why string) RuntimeHealth {
	return RuntimeHealth{Name: name, Error: why}
}

func TestPlace(t *testing.T) {
	t.Parallel()
	const notInPath = `adapter: claude-code: binary "claude" not found in PATH`
	tests := []struct {
		name    string
		regs    []*Registration
		serving int
		why     string
	}{
		{"no worker at all", nil, 0, "no live worker serves claude-code in pool default: no worker is live in the pool"},
		{"only other pools", []*Registration{reg("w1", "gpu", "", healthy("claude-code"))}, 0,
			"no live worker serves claude-code in pool default: no worker is live in the pool"},
		{"served", []*Registration{reg("w1", "default", "", healthy("claude-code")), reg("w2", "default", "", broken("claude-code", notInPath))}, 1, ""},
		{"busy workers serve", []*Registration{{ID: "w1", Pool: "default", Slots: 2, Busy: 2, Runtimes: []RuntimeHealth{healthy("claude-code")}}}, 1, ""},
		{"two not in PATH", []*Registration{reg("w1", "default", "", broken("claude-code", notInPath)), reg("w2", "default", "", broken("claude-code", notInPath), healthy("codex"))}, 0,
			"no live worker serves claude-code in pool default: 2 workers: " + notInPath},
		{"none lists it", []*Registration{reg("w1", "default", "", healthy("codex")), reg("w2", "default", "", healthy("demo"))}, 0,
			"no live worker serves claude-code in pool default: 2 workers of 2 do not list it"},
		{"reasons by count, then the rest", []*Registration{
			reg("w1", "default", "", broken("claude-code", notInPath)),
			reg("w2", "default", "draining: the worker is stopping", healthy("claude-code")),
			reg("w3", "default", "", broken("claude-code", notInPath)),
			reg("w4", "default", "", broken("claude-code", "")),
			reg("w5", "default", "", healthy("codex")),
		}, 0, "no live worker serves claude-code in pool default: 2 workers: " + notInPath +
			"; 1 worker: not claiming: draining: the worker is stopping; 1 worker: unhealthy; 1 worker of 5 does not list it"},
	}
	for _, tt := range tests {
		s := Place(tt.regs, "default", "claude-code")
		if s.Serving != tt.serving || s.Why() != tt.why {
			t.Errorf("%s: serving %d, why %q\nwant %d, %q", tt.name, s.Serving, s.Why(), tt.serving, tt.why)
		}
	}
}

// TestPlaceBounds: what workers report goes into events and onto screens:
// Why stays one bounded line however many workers say however much.
func TestPlaceBounds(t *testing.T) {
	t.Parallel()
	var regs []*Registration
	for i := range 50 {
		why := fmt.Sprintf("reason %d\n%s", i, strings.Repeat("é", 500))
		regs = append(regs, reg(fmt.Sprintf("w%d", i), "default", "", broken("codex", why)))
	}
	why := Place(regs, "default", "codex").Why()
	if strings.ContainsAny(why, "\n\r") || len(why) > 2000 || !strings.Contains(why, "46 more reasons") {
		t.Errorf("%d bytes: %q", len(why), why)
	}
}

func TestViewLiveness(t *testing.T) {
	t.Parallel()
	v := NewView()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v.Put(&Registration{ID: "fast", RenewMS: 1000}, t0)
	v.Put(&Registration{ID: "old"}, t0) // a worker from before renew_ms
	if regs, ok := v.Live(t0); ok || regs != nil {
		t.Fatalf("a view not ready says %v", regs)
	}
	v.SetReady(true)
	ids := func(at time.Time) string {
		regs, _ := v.Live(at)
		var out []string
		for _, r := range regs {
			out = append(out, r.ID)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{
		{0, "fast old"},
		{2900 * time.Millisecond, "fast old"}, // at least 3s, however fast it renews
		{3 * time.Second, "old"},
		{RegistrationTTL - time.Millisecond, "old"},
		{RegistrationTTL, ""},
	} {
		if got := ids(t0.Add(tc.at)); got != tc.want {
			t.Errorf("at +%s: %q, want %q", tc.at, got, tc.want)
		}
	}
	// Renewed: seen again.
	v.Put(&Registration{ID: "fast", RenewMS: 1000}, t0.Add(time.Minute))
	if got := ids(t0.Add(time.Minute + 2*time.Second)); got != "fast old" {
		t.Errorf("renewed: %q", got)
	}
	// After a reconnect every worker gets a full lifetime again.
	v.Refresh(t0.Add(10 * time.Minute))
	if got := ids(t0.Add(10*time.Minute + time.Second)); got != "fast old" {
		t.Errorf("refreshed: %q", got)
	}
	v.Delete("old")
	if got := ids(t0.Add(10*time.Minute + time.Second)); got != "fast" {
		t.Errorf("deleted: %q", got)
	}
	v.Reset()
	if _, ok := v.Live(t0); ok {
		t.Error("a reset view is ready")
	}
}

// TestFollow: a view follows the bucket itself: what is there when it
// starts (then it is ready), registrations and renewals as they come, a
// worker that deregisters, and junk a writer put there, left out.
func TestFollow(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	if err := Register(ctx, js, &Registration{ID: "w1", Pool: "default", Runtimes: []RuntimeHealth{healthy("codex")}}); err != nil {
		t.Fatal(err)
	}
	v := NewView()
	var changes atomic.Int64
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	go func() { done <- Follow(fctx, js, v, time.Now, func() { changes.Add(1) }) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})
	live := func() string {
		regs, ok := v.Live(time.Now())
		if !ok {
			return "not ready"
		}
		var b []string
		for _, r := range regs {
			b = append(b, fmt.Sprintf("%s:%d", r.ID, Place(regs, "default", "claude-code").Serving))
		}
		return strings.Join(b, " ")
	}
	waitView(t, live, "w1:0")
	if err := Register(ctx, js, &Registration{ID: "w2", Pool: "default", RenewMS: 1000, Runtimes: []RuntimeHealth{healthy("claude-code")}}); err != nil {
		t.Fatal(err)
	}
	waitView(t, live, "w1:1 w2:1")
	kv, err := js.KeyValue(ctx, "drover-workers")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(Registration{ID: "someone-else"})
	for key, value := range map[string][]byte{"junk": []byte("{not json"), "forged": raw} {
		if _, err := kv.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := Deregister(ctx, js, "w2"); err != nil {
		t.Fatal(err)
	}
	waitView(t, live, "w1:0")
	if changes.Load() < 4 {
		t.Errorf("%d changes told", changes.Load())
	}
}

// waitView waits, up to a deadline, until live says want.
func waitView(t *testing.T, live func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		if got = live(); got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("view %q, want %q", got, want)
}

// FuzzPlace: a registration is a worker's word, decoded from the bucket
// by Follow: whatever it says, Place counts and Why stays one bounded line
// naming the runtime and pool asked about.
func FuzzPlace(f *testing.F) {
	f.Add([]byte(`{"id":"w1","pool":"default","runtimes":[{"name":"codex","healthy":false,"error":"not in PATH"}]}`), "codex")
	f.Add([]byte(`{"id":"w1","pool":"default","not_claiming":"draining\n\u0000","runtimes":[{"name":"codex","healthy":true}]}`), "codex")
	f.Add([]byte(`{"id":"w1","pool":"default","runtimes":[{"name":"codex","healthy":true},{"name":"codex","error":"x"}]}`), "codex")
	f.Fuzz(func(t *testing.T, raw []byte, runtime string) {
		var r Registration
		if json.Unmarshal(raw, &r) != nil {
			return
		}
		regs := []*Registration{&r, &r}
		s := Place(regs, "default", runtime)
		if s.Live > 2 || s.Serving > s.Live {
			t.Fatalf("%+v", s)
		}
		why := s.Why()
		if s.Serving == 0 && !strings.HasPrefix(why, "no live worker serves "+runtime+" in pool default: ") {
			t.Fatalf("%q", why)
		}
		if s.Serving > 0 && why != "" {
			t.Fatalf("served, yet %q", why)
		}
		if strings.ContainsAny(strings.TrimPrefix(why, "no live worker serves "+runtime), "\n\r") || len(why) > len(runtime)+2000 {
			t.Fatalf("%d bytes: %q", len(why), why)
		}
	})
}
