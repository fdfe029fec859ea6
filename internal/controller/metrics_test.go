package controller

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/telemetry"
)

// TestMetrics scrapes the controller's /metrics and /readyz after a flow's
// attempt has reported and been folded.
func TestMetrics(t *testing.T) {
	srv, err := telemetry.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	scrape := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	h := newHarness(t) // New after Start: instruments bind to the exporting provider
	h.start(filepath.Join(t.TempDir(), "state"))
	id, att := h.submitOne()
	// A worker's consumer, so that queue lag has a series.
	if _, err := queue.EnsureAttemptConsumer(context.Background(), h.js, "default", "demo", queue.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[att] != nil })
	h.publish(event.AttemptClaimed, id, "a", att, 1, event.AttemptClaimedData{Worker: "w1"})
	h.publish(event.AttemptReported, id, "a", att, 1, event.Report{
		Success: false, DurationMS: 1500, Error: &event.ErrorInfo{Class: "RUNTIME_ERROR", Message: "exit 3"},
		Usage: &event.Usage{Model: "m1", InputTokens: new(int64(10)), OutputTokens: new(int64(4))}})
	h.waitFor("the report to be folded", func(st *projection.State) bool { return st.Attempts[att].State == drovertype.AttemptFailed })
	// A cooldown on demo, as the decisions record one, for its gauges.
	now := time.Now()
	h.publish(event.CooldownStarted, id, "a", att, 0, event.CooldownStartedData{
		Scope: event.CooldownRuntime, Name: "demo", Runtime: "demo", Step: 1, From: now, Until: now.Add(time.Hour),
		Source: event.CooldownDefault, Class: drovertype.ClassRateLimited, Cause: "429"})
	h.waitFor("the cooldown to be folded", func(st *projection.State) bool { return st.Cooldowns["runtime:demo"] != nil })

	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body = scrape("/metrics")
		if strings.Contains(body, `drover_attempts_ended_total{class="RUNTIME_ERROR",outcome="failed",runtime="demo"} 1`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{
		`drover_attempts_ended_total{class="RUNTIME_ERROR",outcome="failed",runtime="demo"} 1`,
		`drover_attempt_duration_seconds_count{outcome="failed",runtime="demo"} 1`,
		`drover_tokens_total{direction="input",model="m1",runtime="demo"} 10`,
		`drover_fold_lag_events `,
		`drover_queue_lag_jobs{runtime="demo"} `,
		`drover_runtime_cooldown{runtime="demo",state="cooling"} 1`,
		`drover_runtime_cooldown{runtime="demo",state="half_open"} 0`,
		`drover_runtime_cooldown_remaining_seconds{runtime="demo"} 359`, // about an hour: 359x seconds
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(body, "drover_events_folded_total ") || strings.Contains(body, "drover_events_folded_total 0\n") {
		t.Errorf("drover_events_folded_total missing or zero")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
	if code, body := scrape("/readyz"); code != 200 || !strings.Contains(body, "ok events_stream") || !strings.Contains(body, "ok caught_up") || !strings.Contains(body, "ok nats") || !strings.Contains(body, "ok store") {
		t.Errorf("/readyz = %d %q", code, body)
	}
	h.stop()
	if code, _ := scrape("/readyz"); code != 503 {
		t.Errorf("/readyz after stop = %d, want 503", code)
	}
}
