package fleetsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

// ErrMix is wrapped by every invalid Mix.
var ErrMix = errors.New("fleetsim: invalid runtime mix")

// Mix is what the simulated runtime does, by fractions of runs. Every
// run's outcome is a pure function of Seed, its task and which run of the
// task it is (Outcome; the simulator's task ids are unique across its
// flows), so the simulator knows what each task
// must end as (Expect) without asking anyone. Zero values take the
// defaults; fractions are of all runs and must sum to at most 1, the rest
// succeeding.
type Mix struct {
	// Seed makes a different but equally reproducible fleet. Defaults to 0.
	Seed uint64
	// DurationMedian and DurationP99 shape a run's duration, log-normal
	// like a coding agent's. Default to 50ms and 500ms.
	DurationMedian time.Duration
	DurationP99    time.Duration
	// Fail is the fraction of runs failing with a class the default retry
	// policy retries (RUNTIME_CONNECTION_FAILED). Defaults to 0.
	Fail float64
	// Fatal is the fraction failing with one it does not (RUNTIME_ERROR),
	// which fails the task at once. Defaults to 0.
	Fatal float64
	// RateLimit is the fraction meeting a rate limit that asks to wait
	// RateLimitWait: the controller cools the runtime down fleet-wide.
	// Defaults to 0.
	RateLimit     float64
	RateLimitWait time.Duration // defaults to 500ms
	// Hang is the fraction that run until cancelled; the simulator
	// cancels each once it runs (Runner.Hung). Defaults to 0.
	Hang float64
	// OutputMedian and OutputP99 shape the bytes of output a run writes,
	// log-normal. Default to 2KiB and 64KiB.
	OutputMedian int
	OutputP99    int
	// Files is how many files a run changes (a file_modified event each).
	// Defaults to 2.
	Files int
}

// WithDefaults returns m with its zero values set to the defaults.
func (m Mix) WithDefaults() Mix {
	if m.DurationMedian == 0 {
		m.DurationMedian = 50 * time.Millisecond
	}
	if m.DurationP99 == 0 {
		m.DurationP99 = 10 * m.DurationMedian
	}
	if m.RateLimitWait == 0 {
		m.RateLimitWait = 500 * time.Millisecond
	}
	if m.OutputMedian == 0 {
		m.OutputMedian = 2 << 10
	}
	if m.OutputP99 == 0 {
		m.OutputP99 = 32 * m.OutputMedian
	}
	if m.Files == 0 {
		m.Files = 2
	}
	return m
}

// Validate says which field of m is out of range.
func (m Mix) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"fail", m.Fail}, {"fatal", m.Fatal}, {"rate_limit", m.RateLimit}, {"hang", m.Hang}} {
		if f.v < 0 || f.v > 1 || math.IsNaN(f.v) {
			return fmt.Errorf("%w: %s %v is not a fraction 0..1", ErrMix, f.name, f.v)
		}
	}
	if s := m.Fail + m.Fatal + m.RateLimit + m.Hang; s > 1 {
		return fmt.Errorf("%w: fail, fatal, rate_limit and hang add up to %v, more than 1", ErrMix, s)
	}
	switch {
	case m.DurationMedian < 0 || m.DurationP99 < m.DurationMedian:
		return fmt.Errorf("%w: duration median %s and p99 %s: want 0 <= median <= p99", ErrMix, m.DurationMedian, m.DurationP99)
	case m.OutputMedian < 0 || m.OutputP99 < m.OutputMedian:
		return fmt.Errorf("%w: output median %d and p99 %d: want 0 <= median <= p99", ErrMix, m.OutputMedian, m.OutputP99)
	case m.Files < 0 || m.Files > 100:
		return fmt.Errorf("%w: files %d: want 0..100", ErrMix, m.Files)
	case m.RateLimitWait < 0:
		return fmt.Errorf("%w: rate-limit wait %s is negative", ErrMix, m.RateLimitWait)
	}
	return nil
}

// Kind is how a simulated run ends.
type Kind int

// The kinds of runs.
const (
	Succeeds Kind = iota
	Fails         // a retried class
	Fatal         // a class that fails the task
	RateLimited
	Hangs // until cancelled
)

func (k Kind) String() string {
	return [...]string{"succeeds", "fails", "fatal", "rate-limited", "hangs"}[k]
}

// Class is the error class a run of kind k reports, "" for a success.
func (k Kind) Class() drovertype.ErrorClass {
	switch k {
	case Fails:
		return drovertype.ClassConnectionFailed
	case Fatal:
		return drovertype.ClassRuntimeError
	case RateLimited:
		return drovertype.ClassRateLimited
	case Hangs:
		return drovertype.ClassCancelled
	}
	return ""
}

// Outcome is what one simulated run does.
type Outcome struct {
	Kind     Kind
	Duration time.Duration // before it ends; a hanging run waits for its cancel
	Output   int           // bytes written to stdout
}

// Outcome is what the run-th run (1, 2, …) of a task does.
func (m Mix) Outcome(task string, run int) Outcome {
	m = m.WithDefaults()
	rng := m.rng(task, run)
	o := Outcome{
		Duration: time.Duration(logNormal(rng, float64(m.DurationMedian), float64(m.DurationP99))),
		Output:   int(logNormal(rng, float64(m.OutputMedian), float64(m.OutputP99))),
	}
	u := rng.Float64()
	for _, k := range []struct {
		kind Kind
		p    float64
	}{{Fails, m.Fail}, {Fatal, m.Fatal}, {RateLimited, m.RateLimit}, {Hangs, m.Hang}} {
		if u < k.p {
			o.Kind = k.kind
			return o
		}
		u -= k.p
	}
	return o
}

// rng is the random source of one run: seeded by the mix's seed, the task
// and the run.
func (m Mix) rng(task string, run int) *rand.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], m.Seed)
	h.Write(b[:])
	h.Write([]byte(task))
	binary.LittleEndian.PutUint64(b[:], uint64(run))
	h.Write(b[:])
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// logNormal draws from the log-normal distribution with this median and
// 99th percentile.
func logNormal(rng *rand.Rand, median, p99 float64) float64 {
	if median <= 0 {
		return 0
	}
	sigma := math.Log(p99/median) / 2.3263478740408408 // the normal's 99th percentile
	return median * math.Exp(sigma*rng.NormFloat64())
}

// Expected is what a task must end as, given its runs' outcomes.
type Expected struct {
	State drovertype.TaskState
	Runs  int // how many times it runs
}

// Expect walks a task's runs as the controller's policy treats them, up
// to maxAttempts: a success ends it succeeded, a fatal failure failed, a
// hang cancelled (the simulator cancels it); a retried failure or a rate
// limit goes on to the next run, and the last one failing fails the task.
func (m Mix) Expect(task string, maxAttempts int) Expected {
	for run := 1; ; run++ {
		switch o := m.Outcome(task, run); o.Kind {
		case Succeeds:
			return Expected{State: drovertype.TaskSucceeded, Runs: run}
		case Fatal:
			return Expected{State: drovertype.TaskFailed, Runs: run}
		case Hangs:
			return Expected{State: drovertype.TaskCancelled, Runs: run}
		default:
			if run >= maxAttempts {
				return Expected{State: drovertype.TaskFailed, Runs: run}
			}
		}
	}
}
