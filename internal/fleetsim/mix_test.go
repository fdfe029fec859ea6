package fleetsim

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

func TestOutcomeIsAFunctionOfSeedTaskAndRun(t *testing.T) {
	m := Mix{Seed: 7, Fail: 0.3, Fatal: 0.1, RateLimit: 0.1, Hang: 0.1}
	if a, b := m.Outcome("t1", 1), m.Outcome("t1", 1); a != b {
		t.Fatalf("the same run drew %+v and %+v", a, b)
	}
	differ := 0
	for i := range 100 {
		task := fmt.Sprintf("t%d", i)
		if m.Outcome(task, 1) != m.Outcome(task, 2) {
			differ++
		}
		other := m
		other.Seed = 8
		if m.Outcome(task, 1) != other.Outcome(task, 1) {
			differ++
		}
	}
	if differ < 190 {
		t.Errorf("runs and seeds drew the same outcome too often: %d of 200 differ", differ)
	}
}

func TestOutcomesFollowTheMix(t *testing.T) {
	m := Mix{Seed: 1, Fail: 0.2, Fatal: 0.05, RateLimit: 0.1, Hang: 0.05, DurationMedian: 100 * time.Millisecond,
		DurationP99: time.Second, OutputMedian: 1000, OutputP99: 10000}
	const n = 20000
	kinds := map[Kind]int{}
	under := 0
	for i := range n {
		o := m.Outcome(fmt.Sprintf("task%d", i), 1)
		kinds[o.Kind]++
		if o.Duration <= m.DurationMedian {
			under++
		}
		if o.Duration < 0 || o.Output < 0 {
			t.Fatalf("negative outcome %+v", o)
		}
	}
	for k, want := range map[Kind]float64{Succeeds: 0.6, Fails: 0.2, Fatal: 0.05, RateLimited: 0.1, Hangs: 0.05} {
		if got := float64(kinds[k]) / n; math.Abs(got-want) > 0.015 {
			t.Errorf("%s: %.3f of runs, want %.3f", k, got, want)
		}
	}
	if f := float64(under) / n; math.Abs(f-0.5) > 0.02 {
		t.Errorf("%.3f of runs within the median duration, want 0.5", f)
	}
}

func TestExpect(t *testing.T) {
	for _, tc := range []struct {
		name string
		mix  Mix
		want Expected
	}{
		{"all succeed", Mix{}, Expected{State: drovertype.TaskSucceeded, Runs: 1}},
		{"all fail", Mix{Fail: 1}, Expected{State: drovertype.TaskFailed, Runs: 3}},
		{"rate limits are retried", Mix{RateLimit: 1}, Expected{State: drovertype.TaskFailed, Runs: 3}},
		{"fatal", Mix{Fatal: 1}, Expected{State: drovertype.TaskFailed, Runs: 1}},
		{"hang", Mix{Hang: 1}, Expected{State: drovertype.TaskCancelled, Runs: 1}},
	} {
		if got := tc.mix.Expect("t", 3); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// A mix of kinds: the walk stops at the first run that ends the task.
	m := Mix{Seed: 3, Fail: 0.5}
	for i := range 200 {
		task := fmt.Sprintf("t%d", i)
		e := m.Expect(task, 3)
		for run := 1; run < e.Runs; run++ {
			if k := m.Outcome(task, run).Kind; k != Fails {
				t.Fatalf("%s: run %d %s, yet the task runs %d times", task, run, k, e.Runs)
			}
		}
		if last := m.Outcome(task, e.Runs).Kind; (last == Succeeds) != (e.State == drovertype.TaskSucceeded) {
			t.Fatalf("%s: last run %s, task %s", task, last, e.State)
		}
	}
}

func TestMixValidate(t *testing.T) {
	for _, m := range []Mix{
		{Fail: -0.1}, {Hang: 1.5}, {Fail: 0.6, Fatal: 0.5}, {Fail: math.NaN()},
		{DurationMedian: time.Second, DurationP99: time.Millisecond}, {OutputMedian: 10, OutputP99: 1},
		{Files: 101}, {RateLimitWait: -time.Second},
	} {
		if err := m.Validate(); !errors.Is(err, ErrMix) {
			t.Errorf("%+v: %v, want ErrMix", m, err)
		}
	}
	if err := (Mix{Fail: 0.5, Hang: 0.5}).WithDefaults().Validate(); err != nil {
		t.Errorf("a valid mix: %v", err)
	}
}

func TestPlanSpecs(t *testing.T) {
	p := Plan{Flows: 3, Tasks: 10}.WithDefaults()
	specs, err := p.Specs()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	counts := []int{}
	for _, s := range specs {
		counts = append(counts, len(s.Tasks))
		for _, task := range s.Tasks {
			if seen[task.ID] {
				t.Errorf("task id %s twice", task.ID)
			}
			seen[task.ID] = true
		}
		if s.Retry == nil || s.Retry.MaxAttempts == nil || *s.Retry.MaxAttempts != 3 {
			t.Errorf("flow %s: retry %+v, want max_attempts 3", s.Name, s.Retry)
		}
	}
	if fmt.Sprint(counts) != "[4 3 3]" {
		t.Errorf("tasks per flow %v, want [4 3 3]", counts)
	}
	if _, err := (Plan{Flows: 4, Tasks: 3}).Specs(); err == nil {
		t.Error("3 tasks in 4 flows: no error")
	}
}
