package native

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/drover-dev/drover/internal/native/model"
)

// Budget bounds one attempt. A zero field is no bound. Each is enforced
// exactly, at the edge:
//
//   - Turns: the model is called at most Turns times (a failed call that
//     is retried is the same turn). The tool calls of the last allowed
//     turn are not run, since no turn is left to read their results: an
//     answer that still calls tools then ends the attempt.
//   - Tokens, InputTokens, OutputTokens: usage as the provider reports it,
//     cached input included, summed over turns. Reaching a bound exactly
//     is allowed; passing it ends the attempt before the turn's tool calls
//     run. Each turn's output is capped (max_tokens) at what the output
//     and total budgets have left, so output never passes them; input is
//     known only once a turn is answered, so one turn may pass an input
//     bound, and is the last.
//   - Time: the attempt ends when Time has passed since it started — the
//     model call, the command or the retry wait in progress is cut off.
type Budget struct {
	Turns        int           `json:"turns,omitempty"`
	Tokens       int64         `json:"tokens,omitempty"`
	InputTokens  int64         `json:"input_tokens,omitempty"`
	OutputTokens int64         `json:"output_tokens,omitempty"`
	Time         time.Duration `json:"-"`
}

// budgetJSON is Budget on the wire, its time in milliseconds.
type budgetJSON struct {
	Turns        int   `json:"turns,omitempty"`
	Tokens       int64 `json:"tokens,omitempty"`
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	TimeMS       int64 `json:"time_ms,omitempty"`
}

// MarshalJSON writes the time as time_ms.
func (b Budget) MarshalJSON() ([]byte, error) {
	return json.Marshal(budgetJSON{b.Turns, b.Tokens, b.InputTokens, b.OutputTokens, b.Time.Milliseconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Budget) UnmarshalJSON(data []byte) error {
	var j budgetJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = Budget{j.Turns, j.Tokens, j.InputTokens, j.OutputTokens, time.Duration(j.TimeMS) * time.Millisecond}
	return nil
}

// Budget errors, the causes of the three budget classes.
var (
	ErrTurnBudget  = errors.New("native: turn budget exhausted")
	ErrTokenBudget = errors.New("native: token budget exhausted")
	ErrTimeBudget  = errors.New("native: time budget exhausted")
	// ErrTimeout is the cause when the attempt's own timeout (Input.Timeout)
	// passed, which is reported as a runtime timeout, as for a CLI.
	ErrTimeout = errors.New("native: attempt timed out")
)

// spent is what an attempt has used so far.
type spent struct {
	turns int
	usage model.Usage
}

// canThink reports whether another turn may start, and with how many
// output tokens at most (given the per-turn cap), or which bound is
// reached.
func (b Budget) canThink(s spent, perTurn int64) (int64, error) {
	if b.Turns > 0 && s.turns >= b.Turns {
		return 0, ErrTurnBudget
	}
	out := perTurn
	if b.OutputTokens > 0 {
		out = min(out, b.OutputTokens-s.usage.OutputTokens)
	}
	if b.Tokens > 0 {
		out = min(out, b.Tokens-s.usage.Total())
	}
	if b.InputTokens > 0 && s.usage.AllInput() >= b.InputTokens {
		// The next call's input is at least what was already sent.
		return 0, ErrTokenBudget
	}
	if out < 1 {
		return 0, ErrTokenBudget
	}
	return out, nil
}

// overspent reports whether usage passed a token bound.
func (b Budget) overspent(u model.Usage) bool {
	return (b.Tokens > 0 && u.Total() > b.Tokens) ||
		(b.InputTokens > 0 && u.AllInput() > b.InputTokens) ||
		(b.OutputTokens > 0 && u.OutputTokens > b.OutputTokens)
}

// lastTurn reports whether the turn just taken was the last one allowed.
func (b Budget) lastTurn(s spent) bool { return b.Turns > 0 && s.turns >= b.Turns }

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Cost is what usage cost at p.
func (p Price) Cost(u model.Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}
