package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/flow"
)

func TestLimitsDefaultsAndFile(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Cooldown != (Cooldown{Default: time.Minute, Max: 24 * time.Hour, Coefficient: 2}) || c.Defaults.Budget.Spec() != nil || len(c.Pricing) != 0 {
		t.Errorf("defaults: cooldown %+v, budget %+v, pricing %v", c.Cooldown, c.Defaults.Budget, c.Pricing)
	}
	t.Setenv("DROVER_COOLDOWN_DEFAULT", "45s")
	t.Setenv("DROVER_DEFAULTS_BUDGET_COST_USD", "12.5")
	c, err = Load(LoadOptions{File: writeFile(t, `
cooldown: {default: 10s, max: 2h, coefficient: 3}
defaults:
  budget: {tokens: 3000000000, running: finish}
projects:
  web:
    repo: /r
    budget: {cost_usd: 4}
pricing:
  - {model: claude-sonnet-4-5, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}
  - {model: "claude-*", input: 15, output: 75}
  - {model: "claude-sonnet-*", input: 3, output: 15}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Cooldown != (Cooldown{Default: 45 * time.Second, Max: 2 * time.Hour, Coefficient: 3}) {
		t.Errorf("cooldown %+v: want the variable over the file", c.Cooldown)
	}
	if b := c.Defaults.Budget.Spec(); b == nil || *b != (flow.Budget{Tokens: 3_000_000_000, CostUSD: 12.5, Running: "finish"}) {
		t.Errorf("defaults.budget %+v", b)
	}
	if b := c.Projects["web"].Budget.Spec(); b == nil || b.CostUSD != 4 {
		t.Errorf("projects.web.budget %+v", b)
	}
	for model, want := range map[string]float64{"claude-sonnet-4-5": 0.3, "claude-sonnet-4": 0, "claude-opus-4": 0} {
		p, ok := c.PriceOf(model)
		if !ok || p.CacheRead != want {
			t.Errorf("PriceOf(%s) = %+v %v", model, p, ok)
		}
	}
	if p, _ := c.PriceOf("claude-sonnet-4"); p.Model != "claude-sonnet-*" {
		t.Errorf("PriceOf(claude-sonnet-4) = %s, want the longest prefix", p.Model)
	}
	if _, ok := c.PriceOf("gpt-5"); ok {
		t.Error("gpt-5 priced")
	}
}

func TestCooldownWait(t *testing.T) {
	c := Cooldown{Default: time.Minute, Max: time.Hour, Coefficient: 2}
	for _, tc := range []struct {
		stated time.Duration
		step   int
		want   time.Duration
	}{
		{0, 1, time.Minute},
		{0, 2, 2 * time.Minute},
		{0, 3, 4 * time.Minute},
		{0, 30, time.Hour},
		{3 * time.Second, 1, 3 * time.Second},
		{3 * time.Second, 2, 6 * time.Second},
		{3 * time.Second, 0, 3 * time.Second},
		{5 * time.Hour, 1, time.Hour}, // a reset beyond max waits max, then probes
		{100 * time.Millisecond, 1, time.Second},
		{0, 1 << 30, time.Hour},
	} {
		if got := c.Wait(tc.stated, tc.step); got != tc.want {
			t.Errorf("Wait(%s, %d) = %s, want %s", tc.stated, tc.step, got, tc.want)
		}
	}
	if got := (Cooldown{}).Wait(0, 2); got != 2*time.Minute {
		t.Errorf("the zero Cooldown waits %s at step 2, want the defaults' 2m", got)
	}
}

func TestInvalidLimits(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"cooldown default", "cooldown: {default: 0s}\n", "cooldown.default"},
		{"cooldown default long", "cooldown: {default: 25h}\n", "cooldown.default: must be 1s..24h"},
		{"cooldown max", "cooldown: {max: 1000h}\n", "cooldown.max"},
		{"cooldown coefficient", "cooldown: {coefficient: 0.5}\n", "cooldown.coefficient"},
		{"cooldown unknown", "cooldown: {defualt: 1m}\n", "defualt"},
		{"budget tokens", "defaults: {budget: {tokens: -1}}\n", "defaults.budget.tokens: -1 is out of range"},
		{"budget running", "defaults: {budget: {running: drain}}\n", "defaults.budget.running"},
		{"project budget", "projects: {web: {repo: /r, budget: {cost_usd: -3}}}\n", "projects.web.budget.cost_usd"},
		{"price model", "pricing: [{input: 3}]\n", "pricing[0].model: required"},
		{"price negative", "pricing: [{model: m, output: -1}]\n", "pricing[0].output"},
		{"price twice", "pricing: [{model: m}, {model: m}]\n", `pricing[1].model: "m" is priced twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
