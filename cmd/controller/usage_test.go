package main

import (
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// copilot reports no tokens: the report says unknown, never 0.
func TestUsageText(t *testing.T) {
	in, out, cost := int64(38432), int64(24), 0.19276
	for _, tc := range []struct {
		u    *event.Usage
		want string
	}{
		{nil, "unknown (the CLI reported none)"},
		{&event.Usage{Model: "mock-model"}, "unknown (the CLI reported none)"},
		{&event.Usage{InputTokens: &in, OutputTokens: &out, CostUSD: &cost, Model: "opus"}, "38432 tokens in, 24 out, $0.1928 (opus)"},
		{&event.Usage{InputTokens: &in}, "38432 tokens in, unknown out"},
		{&event.Usage{OutputTokens: &out, CacheReadTokens: &in}, "unknown tokens in, 24 out, cache 38432 read, unknown written"},
	} {
		if got := usageText(tc.u); got != tc.want {
			t.Errorf("usageText(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
}
