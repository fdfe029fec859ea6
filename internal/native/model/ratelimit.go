package model

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWait bounds any wait read from a header, so a hostile or broken value
// cannot park a task for years.
const maxWait = 24 * time.Hour

// RetryAfterOf reads how long a throttled client should wait, and when a
// limit resets, from a response's headers, as the providers document them:
//
//   - retry-after-ms: milliseconds (OpenAI);
//   - retry-after: seconds, or an HTTP date (RFC 9110);
//   - x-ratelimit-reset-requests / -tokens: a duration such as "6m0s" or
//     "20ms" (OpenAI), used when no retry-after is given;
//   - anthropic-ratelimit-*-reset: an RFC 3339 time (Anthropic).
//
// Unparseable, negative or absurd values are ignored.
func RetryAfterOf(h http.Header, now time.Time) (wait time.Duration, resetAt time.Time) {
	if h == nil {
		return 0, time.Time{}
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			wait = clampWait(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("retry-after"); wait == 0 && v != "" {
		v = strings.TrimSpace(v)
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			wait = clampWait(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			wait = clampWait(float64(t.Sub(now)))
		}
	}
	if wait == 0 {
		for _, name := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
			if d, err := time.ParseDuration(strings.TrimSpace(h.Get(name))); err == nil {
				wait = max(wait, clampWait(float64(d)))
			}
		}
	}
	for _, name := range []string{
		"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset",
		"anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-output-tokens-reset",
	} {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get(name)))
		if err != nil || t.Before(now) || t.Sub(now) > maxWait {
			continue
		}
		if t.After(resetAt) {
			resetAt = t // the last limit to reset is the one that frees the key
		}
	}
	return wait, resetAt.UTC()
}

func clampWait(ns float64) time.Duration {
	if math.IsNaN(ns) || ns <= 0 {
		return 0
	}
	if ns > float64(maxWait) {
		return maxWait
	}
	return time.Duration(ns)
}
