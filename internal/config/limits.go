package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/flow"
)

// Cooldown tunes how the fleet waits out a provider's limit
// (docs/design.md#cooldowns).
type Cooldown struct {
	// Default is a cooldown's length when the CLI states no wait or reset
	// time: 1s..24h. Defaults to 1m.
	Default time.Duration `mapstructure:"default"`
	// Max caps every cooldown, a stated reset time and backoff included:
	// 1s..720h. Defaults to 24h.
	Max time.Duration `mapstructure:"max"`
	// Coefficient multiplies a cooldown's wait each time its probe meets the
	// limit again: 1..10. Defaults to 2.
	Coefficient float64 `mapstructure:"coefficient"`
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Cooldown) WithDefaults() Cooldown {
	if c.Default <= 0 {
		c.Default = time.Minute
	}
	if c.Max <= 0 {
		c.Max = 24 * time.Hour
	}
	if !(c.Coefficient >= 1) {
		c.Coefficient = 2
	}
	return c
}

// Wait is the cooldown for a limit met at step (1 for a new cooldown, one
// more per limit its probe met), given the wait the CLI stated (0: none):
// the stated wait, else Default, times Coefficient^(step-1), never shorter
// than the stated wait and never longer than Max.
func (c Cooldown) Wait(stated time.Duration, step int) time.Duration {
	c = c.WithDefaults()
	base := stated
	if base <= 0 {
		base = c.Default
	}
	w := float64(base) * math.Pow(c.Coefficient, float64(max(step, 1)-1))
	if !(w < float64(c.Max)) { // also NaN and overflow
		w = float64(c.Max)
	}
	d := max(time.Duration(w), stated)
	return min(max(d, time.Second), c.Max)
}

// Budget is a budget at one level of configuration (defaults.budget,
// projects.<name>.budget); zero fields limit nothing.
type Budget struct {
	// Tokens caps the input and output tokens of a flow. Defaults to 0, none.
	Tokens int64 `mapstructure:"tokens"`
	// CostUSD caps a flow's cost in US dollars. Defaults to 0, none.
	CostUSD float64 `mapstructure:"cost_usd"`
	// Running is what happens to running attempts when it is reached:
	// stop or finish. Defaults to stop.
	Running string `mapstructure:"running"`
}

// Spec returns b as a flow's budget, nil when it limits nothing.
func (b Budget) Spec() *flow.Budget {
	s := &flow.Budget{Tokens: b.Tokens, CostUSD: b.CostUSD, Running: b.Running}
	if !s.Limited() {
		return nil
	}
	return s
}

// Price is what a model costs, in US dollars per million tokens. The
// controller estimates the cost of usage a CLI reported without a cost of
// its own from these (docs/config.md#budgets-and-pricing).
type Price struct {
	// Model is the model's name as the CLIs report it; a trailing * matches
	// every name that begins with the rest.
	Model      string  `mapstructure:"model"`
	Input      float64 `mapstructure:"input"`
	Output     float64 `mapstructure:"output"`
	CacheRead  float64 `mapstructure:"cache_read"`
	CacheWrite float64 `mapstructure:"cache_write"`
}

// PriceOf returns the price of model: an exact entry, else the entry with
// the longest prefix that matches; false when none does.
func (c *Config) PriceOf(model string) (Price, bool) {
	var best Price
	found, bestLen := false, -1
	for _, p := range c.Pricing {
		if p.Model == model {
			return p, true
		}
		if prefix, ok := strings.CutSuffix(p.Model, "*"); ok && strings.HasPrefix(model, prefix) && len(prefix) > bestLen {
			best, found, bestLen = p, true, len(prefix)
		}
	}
	return best, found
}

// Bounds of the limits' settings.
const (
	maxPrices   = 1000
	maxPriceUSD = 100_000 // per million tokens
)

func (c *Config) validateLimits(p *problems) {
	cd := c.Cooldown
	if cd.Default < time.Second || cd.Default > 24*time.Hour {
		p.add("cooldown.default", "must be 1s..24h (got %s)", cd.Default)
	}
	if cd.Max < time.Second || cd.Max > 720*time.Hour {
		p.add("cooldown.max", "must be 1s..720h (got %s)", cd.Max)
	}
	if !(cd.Coefficient >= 1 && cd.Coefficient <= 10) {
		p.add("cooldown.coefficient", "must be 1..10 (got %v)", cd.Coefficient)
	}
	validateBudget(p, "defaults.budget", c.Defaults.Budget)
	for name, pr := range c.Projects {
		validateBudget(p, "projects."+name+".budget", pr.Budget)
	}
	if len(c.Pricing) > maxPrices {
		p.add("pricing", "%d entries; the limit is %d", len(c.Pricing), maxPrices)
		return
	}
	seen := map[string]bool{}
	for i, pr := range c.Pricing {
		key := "pricing[" + strconv.Itoa(i) + "]"
		if pr.Model == "" {
			p.add(key+".model", "required: the model's name as the CLIs report it")
		}
		if seen[pr.Model] {
			p.add(key+".model", "%q is priced twice", pr.Model)
		}
		seen[pr.Model] = true
		for _, f := range []struct {
			name string
			v    float64
		}{{"input", pr.Input}, {"output", pr.Output}, {"cache_read", pr.CacheRead}, {"cache_write", pr.CacheWrite}} {
			if !(f.v >= 0 && f.v <= maxPriceUSD) {
				p.add(key+"."+f.name, "must be 0..%d US dollars per million tokens (got %v)", maxPriceUSD, f.v)
			}
		}
	}
}

// validateBudget checks a budget as a flow file's is checked.
func validateBudget(p *problems, key string, b Budget) {
	var ve *flow.ValidationError
	if err := flow.CheckBudget(&flow.Budget{Tokens: b.Tokens, CostUSD: b.CostUSD, Running: b.Running}); errors.As(err, &ve) {
		for _, e := range ve.Errors {
			p.add(key+strings.TrimPrefix(e.Field, "budget"), "%s", e.Msg)
		}
	}
}
