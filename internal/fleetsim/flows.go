package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/flow"
)

// Plan is the flows the simulator submits: Tasks independent tasks in all,
// spread evenly over Flows flows, each task a simulated run.
type Plan struct {
	Flows, Tasks int
	// Runtime is every task's runtime.
	Runtime string
	// MaxAttempts is the flows' retry policy's; retries wait
	// InitialBackoff at first, so that a simulated failure costs the
	// controller its decisions, not the simulator its minutes.
	MaxAttempts    int
	InitialBackoff string
	// Repo names a repository nobody reads: no git runs.
	Repo string
	// Tag is in every flow's name, so that the flows of two simulations
	// on one controller are told apart. Defaults to a random one.
	Tag string
}

// WithDefaults fills the plan's zero values: 1 flow, runtime demo, 3
// attempts, a 100ms first backoff, the repo /fleetsim/none.git.
func (p Plan) WithDefaults() Plan {
	if p.Flows == 0 {
		p.Flows = 1
	}
	if p.Runtime == "" {
		p.Runtime = "demo"
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	if p.InitialBackoff == "" {
		p.InitialBackoff = "100ms"
	}
	if p.Repo == "" {
		p.Repo = "/fleetsim/none.git"
	}
	if p.Tag == "" {
		p.Tag = strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36)
	}
	return p
}

// TaskID names the i-th task (from 0) of flow f: unique across the
// simulator's flows, since a run's outcome is drawn from its task's id.
func (p Plan) TaskID(f, i int) string {
	if p.Flows == 1 {
		return fmt.Sprintf("t%06d", i)
	}
	return fmt.Sprintf("f%04d-t%06d", f, i)
}

// FlowName names flow f.
func (p Plan) FlowName(f int) string { return fmt.Sprintf("fleetsim-%s-%04d", p.Tag, f) }

// tasksOf is how many tasks flow f has.
func (p Plan) tasksOf(f int) int {
	n := p.Tasks / p.Flows
	if f < p.Tasks%p.Flows {
		n++
	}
	return n
}

// Specs returns the flows, each written as a flow file and parsed as
// `controller submit` parses one.
func (p Plan) Specs() ([]*flow.Spec, error) {
	p = p.WithDefaults()
	if p.Flows < 1 || p.Tasks < p.Flows || p.Tasks > p.Flows*flow.MaxTasks {
		return nil, fmt.Errorf("fleetsim: %d tasks in %d flows: want at least one task per flow, at most %d", p.Tasks, p.Flows, flow.MaxTasks)
	}
	specs := make([]*flow.Spec, p.Flows)
	for f := range p.Flows {
		var b strings.Builder
		fmt.Fprintf(&b, "name: %s\nrepo: %s\nbase: main\nruntime: %s\n", p.FlowName(f), p.Repo, p.Runtime)
		fmt.Fprintf(&b, "retry:\n  max_attempts: %d\n  initial_backoff: %s\n  max_backoff: 2s\n", p.MaxAttempts, p.InitialBackoff)
		b.WriteString("tasks:\n")
		for i := range p.tasksOf(f) {
			fmt.Fprintf(&b, "  - id: %s\n    prompt: simulated\n", p.TaskID(f, i))
		}
		spec, err := flow.Parse(p.FlowName(f)+".yaml", []byte(b.String()), flow.Options{})
		if err != nil {
			return nil, fmt.Errorf("fleetsim: %w", err)
		}
		specs[f] = spec
	}
	return specs, nil
}
