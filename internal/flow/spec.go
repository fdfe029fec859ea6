package flow

import (
	"container/heap"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/drover-dev/drover/internal/drovertype"
)

// Limits that keep a hostile or broken flow from exhausting memory: the
// CLI parses a file with them, and the controller validates the spec it
// receives with them. A file may hold the largest flow (MaxTasks tasks with
// prompts of some 50 bytes); parsing the most hostile file of that size
// allocates about 2.5 GB in all (BenchmarkParseHostile).
const (
	MaxFileSize   = 8 << 20   // bytes in a flow file
	MaxTasks      = 100_000   // tasks in one flow
	MaxPromptSize = 256 << 10 // bytes in one prompt

	MaxModelLen  = 200     // bytes in a model name
	MaxArgs      = 64      // extra arguments of one runtime
	MaxArgLen    = 4096    // bytes in one argument
	MaxVerify    = 50      // verification commands of one task
	MaxVerifyLen = 8 << 10 // bytes in one verification command
	MaxGlobs     = 200     // globs in one allow or deny list
	MaxGlobLen   = 1024    // bytes in one glob
	MaxRetryOn   = 64      // error classes in one retry_on list
	MaxFallback  = 16      // runtimes in one fallback chain

	// MaxGlobAlternatives bounds the patterns one glob's {a,b} alternatives
	// expand to: matching tries each, so their product is the cost of
	// matching a path.
	MaxGlobAlternatives = 64
)

// DefaultBase is the revision tasks start from when a flow names none.
const DefaultBase = "HEAD"

// Spec is a parsed and validated flow file. It also travels inside events as
// JSON, so its JSON form is a wire format.
type Spec struct {
	// Name identifies the flow; it must satisfy drovertype.ValidID.
	Name string `yaml:"name" json:"name"`
	// Repo is a git URL, or an absolute local path after Parse.
	Repo string `yaml:"repo" json:"repo"`
	// Base is the revision (branch, tag or sha) tasks start from. Parse sets
	// DefaultBase when the file names none; Validate treats "" the same way.
	Base string `yaml:"base" json:"base"`
	// Project names a project of the controller's configuration: its repo
	// (when the flow names none) and its defaults apply.
	Project string `yaml:"project" json:"project,omitempty"`
	// Runtime is the default runtime for tasks that do not name one. In the
	// file it is a name, or a mapping {name, model, args} that also sets
	// Model and Args.
	Runtime string `yaml:"runtime" json:"runtime"`
	// Model overrides the runtime's configured model.
	Model string `yaml:"model" json:"model,omitempty"`
	// Args are appended to the runtime's configured arguments.
	Args []string `yaml:"args" json:"args,omitempty"`
	// Validator is the default runtime that reviews tasks (role validator).
	Validator *RuntimeRef `yaml:"validator" json:"validator,omitempty"`
	// Review asks the validator to review every task unless a task says no.
	Review *bool `yaml:"review" json:"review,omitempty"`
	// Retry is the flow's retry policy; unset fields inherit.
	Retry *RetrySpec `yaml:"retry" json:"retry,omitempty"`
	// MaxParallel bounds the flow's attempts running at once; 0 means the
	// configured default.
	MaxParallel int `yaml:"max_parallel" json:"max_parallel,omitempty"`
	// Scope is the default scope of every task.
	Scope *Scope `yaml:"scope" json:"scope,omitempty"`
	// Timeout is the default per-task wall-clock limit; 0 means the
	// configured default.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// PlacementTimeout is how long an attempt may wait while no live
	// worker serves its runtime before it ends NO_WORKER; 0 means the
	// project's, the configured default or 10m.
	PlacementTimeout Duration `yaml:"placement_timeout" json:"placement_timeout,omitempty"`
	// Budget caps what the whole flow may spend; nil means its project's
	// or the configured default.
	Budget *Budget `yaml:"budget" json:"budget,omitempty"`
	// Tasks are kept in file order, which breaks ties everywhere an order is
	// needed.
	Tasks []Task `yaml:"tasks" json:"tasks"`
	// Publish opens a pull request when the flow ends, and follows it
	// (publish.go); nil means its project's, or nothing.
	Publish *Publish `yaml:"publish" json:"publish,omitempty"`
}

// Task is one agent run in a flow.
type Task struct {
	// ID must satisfy drovertype.ValidID and be unique in the flow.
	ID string `yaml:"id" json:"id"`
	// Prompt is handed to the runtime as written.
	Prompt string `yaml:"prompt" json:"prompt"`
	// DependsOn lists ids of tasks whose results this task starts from.
	// Parse leaves it nil rather than empty, so a Spec survives a JSON
	// round trip unchanged.
	DependsOn []string `yaml:"depends_on" json:"depends_on,omitempty"`
	// Runtime overrides Spec.Runtime; Model and Args as in Spec.
	Runtime string   `yaml:"runtime" json:"runtime,omitempty"`
	Model   string   `yaml:"model" json:"model,omitempty"`
	Args    []string `yaml:"args" json:"args,omitempty"`
	// Validator overrides Spec.Validator.
	Validator *RuntimeRef `yaml:"validator" json:"validator,omitempty"`
	// Review overrides Spec.Review.
	Review *bool `yaml:"review" json:"review,omitempty"`
	// Retry overrides Spec.Retry field by field.
	Retry *RetrySpec `yaml:"retry" json:"retry,omitempty"`
	// Timeout overrides Spec.Timeout.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// PlacementTimeout overrides Spec.PlacementTimeout.
	PlacementTimeout Duration `yaml:"placement_timeout" json:"placement_timeout,omitempty"`
	// Verify are shell commands run in the worktree after the CLI exits;
	// the task fails with VERIFICATION_FAILED when one exits non-zero.
	Verify []string `yaml:"verify" json:"verify,omitempty"`
	// VerifyTimeout bounds each verification command; 0 means 10m.
	VerifyTimeout Duration `yaml:"verify_timeout" json:"verify_timeout,omitempty"`
	// Scope overrides Spec.Scope as a whole.
	Scope *Scope `yaml:"scope" json:"scope,omitempty"`
	// Budget caps what this task may spend, within the flow's.
	Budget *Budget `yaml:"budget" json:"budget,omitempty"`
}

// Budget caps what a flow or a task may spend, summed from its attempts'
// reported usage (docs/flows.md#budgets). A zero limit is no limit.
type Budget struct {
	// Tokens caps the input and output tokens the CLIs report.
	Tokens int64 `yaml:"tokens" json:"tokens,omitempty"`
	// CostUSD caps the cost in US dollars: the CLI's own figure where it
	// reports one, else an estimate from the configured pricing.
	CostUSD float64 `yaml:"cost_usd" json:"cost_usd,omitempty"`
	// Running is what happens to attempts running when the budget is
	// reached: BudgetStop (the default) or BudgetFinish.
	Running string `yaml:"running" json:"running,omitempty"`
}

// What a reached budget does to the attempts running.
const (
	BudgetStop   = "stop"   // they are stopped, as a cancel stops them
	BudgetFinish = "finish" // they finish; nothing new starts
)

// Limited reports whether b limits anything.
func (b *Budget) Limited() bool { return b != nil && (b.Tokens > 0 || b.CostUSD > 0) }

// Stops reports whether reaching b stops the attempts running.
func (b *Budget) Stops() bool { return b == nil || b.Running != BudgetFinish }

// RuntimeRef names a runtime with optional model and extra arguments. In a
// file it is a name, or a mapping with name, model and args.
type RuntimeRef struct {
	Name  string   `yaml:"name" json:"name"`
	Model string   `yaml:"model" json:"model,omitempty"`
	Args  []string `yaml:"args" json:"args,omitempty"`
}

// RetrySpec is a retry policy at one level of resolution. Every field is
// optional: an unset one (nil, or an empty list) inherits from the level
// below. internal/policy documents the defaults and the meaning.
type RetrySpec struct {
	MaxAttempts    *int                    `yaml:"max_attempts" json:"max_attempts,omitempty"`
	InitialBackoff *Duration               `yaml:"initial_backoff" json:"initial_backoff,omitempty"`
	Coefficient    *float64                `yaml:"coefficient" json:"coefficient,omitempty"`
	MaxBackoff     *Duration               `yaml:"max_backoff" json:"max_backoff,omitempty"`
	Jitter         *float64                `yaml:"jitter" json:"jitter,omitempty"`
	RetryOn        []drovertype.ErrorClass `yaml:"retry_on" json:"retry_on,omitempty"`
	Fallback       []string                `yaml:"fallback" json:"fallback,omitempty"`
	RateLimitWait  *Duration               `yaml:"rate_limit_wait" json:"rate_limit_wait,omitempty"`
}

// Scope limits which paths a task may change, as globs relative to the repo
// root ("**" matches any number of directories). With Allow set, a change
// must match one of its globs; a change matching Deny is never allowed.
type Scope struct {
	Allow []string `yaml:"allow" json:"allow,omitempty"`
	Deny  []string `yaml:"deny" json:"deny,omitempty"`
}

// Allows reports whether a task with this scope may change path, a
// slash-separated path relative to the repository root. A nil Scope allows
// everything. Otherwise the path must match one Allow glob (when Allow is
// non-empty) and no Deny glob. The path is cleaned first; one that is
// absolute or leaves the root ("../x") is never allowed by a non-nil Scope.
func (s *Scope) Allows(p string) bool {
	if s == nil {
		return true
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return false
	}
	if len(s.Allow) > 0 && !matchAny(s.Allow, p, false) {
		return false
	}
	return !matchAny(s.Deny, p, true)
}

// matchAny reports whether p matches one of globs. An invalid glob, which
// only a Spec that was never validated holds, counts as invalidMatches, so
// that it fails closed: it allows nothing and denies everything.
func matchAny(globs []string, p string, invalidMatches bool) bool {
	for _, g := range globs {
		ok := invalidMatches
		if doublestar.ValidatePattern(g) {
			ok = doublestar.MatchUnvalidated(g, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// ScopeFor returns the scope of a task: its own when it sets one (which
// replaces the flow's as a whole), else the flow's; nil means unrestricted.
func (s *Spec) ScopeFor(t *Task) *Scope {
	if t.Scope != nil {
		return t.Scope
	}
	return s.Scope
}

// RuntimeFor returns the task's runtime, or the flow default.
func (s *Spec) RuntimeFor(t *Task) string {
	if t.Runtime != "" {
		return t.Runtime
	}
	return s.Runtime
}

// Task returns the task with that id. It scans the list: flows are small,
// and a Spec stays a plain value that is safe to share and copy.
func (s *Spec) Task(id string) (*Task, bool) {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return &s.Tasks[i], true
		}
	}
	return nil, false
}

// TopoOrder returns the task ids in a deterministic topological order: at
// each step it takes the earliest task in file order whose dependencies have
// all been taken. On a Spec that failed validation it still returns every
// task once: unknown dependencies are ignored, and tasks left on a cycle are
// appended in file order.
func (s *Spec) TopoOrder() []string {
	g := s.graph()
	n := len(s.Tasks)
	order := make([]string, 0, n)
	pending := make([]int, n) // unmet dependencies per task
	ready := &indexHeap{}
	for i := range n {
		pending[i] = len(g.deps[i])
		if pending[i] == 0 {
			heap.Push(ready, i)
		}
	}
	done := make([]bool, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		done[i] = true
		order = append(order, s.Tasks[i].ID)
		for _, j := range g.dependents[i] {
			if pending[j]--; pending[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	for i := range n {
		if !done[i] {
			order = append(order, s.Tasks[i].ID)
		}
	}
	return order
}

// Dependents returns, for each task id, the ids of the tasks that depend on
// it directly, in file order. Every task id is a key; leaves map to nil.
func (s *Spec) Dependents() map[string][]string {
	g := s.graph()
	out := make(map[string][]string, len(s.Tasks))
	for i := range s.Tasks {
		id := s.Tasks[i].ID
		if _, seen := out[id]; seen {
			continue // duplicate id in an invalid spec: keep the first
		}
		var ids []string
		for _, j := range g.dependents[i] {
			ids = append(ids, s.Tasks[j].ID)
		}
		out[id] = ids
	}
	return out
}

// graph is the dependency graph by task index. It tolerates invalid specs:
// edges to unknown tasks, self edges and repeated edges are dropped, and a
// duplicated id resolves to its first task.
type graph struct {
	deps       [][]int // deps[i]: tasks i depends on, in depends_on order
	dependents [][]int // dependents[i]: tasks depending on i, in file order
}

func (s *Spec) graph() graph {
	n := len(s.Tasks)
	index := make(map[string]int, n)
	for i := range s.Tasks {
		if _, dup := index[s.Tasks[i].ID]; !dup {
			index[s.Tasks[i].ID] = i
		}
	}
	g := graph{deps: make([][]int, n), dependents: make([][]int, n)}
	for i := range s.Tasks {
		seen := make(map[int]bool, len(s.Tasks[i].DependsOn))
		for _, dep := range s.Tasks[i].DependsOn {
			j, ok := index[dep]
			if !ok || j == i || seen[j] {
				continue
			}
			seen[j] = true
			g.deps[i] = append(g.deps[i], j)
			// i grows monotonically, so each dependents list is in file order.
			g.dependents[j] = append(g.dependents[j], i)
		}
	}
	return g
}

// indexHeap is a min-heap of task indexes: the earliest ready task in file
// order comes out first.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
