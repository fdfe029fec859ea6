package model

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterOf(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		wait    time.Duration
		reset   time.Time
	}{
		{"none", nil, 0, time.Time{}},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, time.Time{}},
		{"fractional seconds", map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond, time.Time{}},
		{"http date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30 * time.Second, time.Time{}},
		{"date in the past", map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, time.Time{}},
		{"ms wins over seconds", map[string]string{"retry-after-ms": "1500", "retry-after": "9"}, 1500 * time.Millisecond, time.Time{}},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, time.Time{}},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, time.Time{}},
		{"absurd is capped", map[string]string{"Retry-After": "1e30"}, maxWait, time.Time{}},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0, time.Time{}},
		{"openai reset durations, the longer", map[string]string{"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "6m0s"}, 6 * time.Minute, time.Time{}},
		{"retry-after beats reset durations", map[string]string{"x-ratelimit-reset-tokens": "6m0s", "Retry-After": "2"}, 2 * time.Second, time.Time{}},
		{"anthropic resets, the latest", map[string]string{
			"anthropic-ratelimit-requests-reset": "2026-03-01T12:00:10Z",
			"anthropic-ratelimit-tokens-reset":   "2026-03-01T12:01:00Z",
			"retry-after":                        "10",
		}, 10 * time.Second, now.Add(time.Minute)},
		{"anthropic reset in the past ignored", map[string]string{"anthropic-ratelimit-tokens-reset": "2026-03-01T11:00:00Z"}, 0, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			wait, reset := RetryAfterOf(h, now)
			if wait != c.wait || !reset.Equal(c.reset) {
				t.Errorf("RetryAfterOf = %v, %v; want %v, %v", wait, reset, c.wait, c.reset)
			}
		})
	}
}

func FuzzRetryAfterOf(f *testing.F) {
	f.Add("7", "", "", "")
	f.Add("Sun, 01 Mar 2026 12:00:30 GMT", "1500", "6m0s", "2026-03-01T12:01:00Z")
	f.Add("1e308", "-1", "-5s", "not a time")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, ms, reset, areset string) {
		h := http.Header{}
		h.Set("retry-after", ra)
		h.Set("retry-after-ms", ms)
		h.Set("x-ratelimit-reset-tokens", reset)
		h.Set("anthropic-ratelimit-tokens-reset", areset)
		wait, at := RetryAfterOf(h, now)
		if wait < 0 || wait > maxWait {
			t.Fatalf("wait %v out of [0, %v]", wait, maxWait)
		}
		if !at.IsZero() && (at.Before(now) || at.Sub(now) > maxWait) {
			t.Fatalf("reset %v out of range", at)
		}
	})
}

func TestKindOfStatus(t *testing.T) {
	for status, want := range map[int]Kind{
		429: KindRateLimited, 401: KindAuth, 403: KindAuth, 500: KindTransient, 502: KindTransient,
		503: KindTransient, 529: KindTransient, 408: KindTransient, 409: KindTransient,
		400: KindRequest, 404: KindRequest, 413: KindRequest, 422: KindRequest, 200: KindMalformed,
	} {
		if got := KindOfStatus(status); got != want {
			t.Errorf("KindOfStatus(%d) = %s, want %s", status, got, want)
		}
	}
}
