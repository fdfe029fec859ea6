package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// Resolution is a flow's runtimes and policy, task by task, as the
// controller resolves them: task > flow > project > global default.
type Resolution struct {
	Repo        string                     `json:"repo"`
	MaxParallel int                        `json:"max_parallel,omitempty"`
	Tasks       map[string]policy.Resolved `json:"tasks"`
	// Budget is the flow's: its own, else its project's, else
	// defaults.budget, each taken whole; nil when none limits anything.
	Budget *flow.Budget `json:"budget,omitempty"`
	// Publish is what the flow is published with (publishspec.go), and
	// RoundPlan how the tasks of a review round run; nil without one.
	Publish   *flow.Publish    `json:"publish,omitempty"`
	RoundPlan *policy.Resolved `json:"round_plan,omitempty"`
}

// Resolve fills what a flow takes from its project (the repo, when the flow
// names none) and resolves every task. It fails when a task ends up without
// a runtime, or asks for a review without a validator.
func Resolve(cfg *config.Config, spec *flow.Spec) (*Resolution, error) {
	res := &Resolution{Repo: spec.Repo, MaxParallel: cfg.Defaults.MaxParallel, Tasks: map[string]policy.Resolved{},
		Budget: cfg.Defaults.Budget.Spec()}
	var project policy.Layer
	if spec.Project != "" {
		p, ok := cfg.Projects[spec.Project]
		if !ok {
			return nil, fmt.Errorf("project: unknown project %q (configured: %s)", spec.Project, strings.Join(cfg.ProjectNames(), ", "))
		}
		if res.Repo == "" {
			res.Repo = p.Repo
		}
		if b := p.Budget.Spec(); b != nil {
			res.Budget = b
		}
		if p.MaxParallel > 0 {
			res.MaxParallel = p.MaxParallel
		}
		project = policy.Layer{Level: policy.LevelProject, Runtime: flow.RuntimeRef{Name: p.Runtime, Model: p.Model, Args: p.Args},
			Review: p.Review, Retry: p.Retry.Spec(), Timeout: flow.Duration(p.Timeout), PlacementTimeout: flow.Duration(p.PlacementTimeout)}
		if p.Validator != "" || p.ValidatorModel != "" {
			project.Validator = &flow.RuntimeRef{Name: p.Validator, Model: p.ValidatorModel}
		}
	}
	if res.Repo == "" {
		return nil, fmt.Errorf("repo: the flow names no repo and no project with one")
	}
	if spec.MaxParallel > 0 {
		res.MaxParallel = spec.MaxParallel
	}
	if spec.Budget.Limited() {
		b := *spec.Budget
		res.Budget = &b
	}
	global := policy.Layer{Level: policy.LevelGlobal, Runtime: flow.RuntimeRef{Name: cfg.Defaults.Runtime},
		Retry: cfg.Defaults.Retry.Spec(), PlacementTimeout: flow.Duration(cfg.Defaults.PlacementTimeout)}
	if cfg.Defaults.Validator != "" {
		global.Validator = &flow.RuntimeRef{Name: cfg.Defaults.Validator}
	}
	flowLayer := policy.Layer{Level: policy.LevelFlow, Runtime: flow.RuntimeRef{Name: spec.Runtime, Model: spec.Model, Args: spec.Args},
		Validator: spec.Validator, Review: spec.Review, Retry: spec.Retry, Timeout: spec.Timeout, Scope: spec.Scope,
		PlacementTimeout: spec.PlacementTimeout}
	var problems []string
	for i := range spec.Tasks {
		t := &spec.Tasks[i]
		task := policy.Layer{Level: policy.LevelTask, Runtime: flow.RuntimeRef{Name: t.Runtime, Model: t.Model, Args: t.Args},
			Validator: t.Validator, Review: t.Review, Retry: t.Retry, Timeout: t.Timeout, Scope: t.Scope,
			PlacementTimeout: t.PlacementTimeout}
		r := policy.Resolve(task, flowLayer, project, global)
		field := fmt.Sprintf("tasks[%d]", i)
		known := func(name string) bool { _, ok := cfg.Runtimes[name]; return ok }
		switch {
		case r.Worker.Name == "":
			problems = append(problems, field+".runtime: no runtime: set one on the task, the flow, its project, or defaults.runtime")
		case !known(r.Worker.Name):
			problems = append(problems, fmt.Sprintf("%s.runtime: unknown runtime %q (configured: %s)", field, r.Worker.Name, strings.Join(cfg.RuntimeNames(), ", ")))
		case cfg.Runtimes[r.Worker.Name].Adapter == "native":
			// Any model of its provider; no command line to add to.
			if len(r.Worker.Args) > 0 {
				problems = append(problems, fmt.Sprintf("%s.runtime: runtime %s is native, so args %q have nothing to go to", field, r.Worker.Name, r.Worker.Args))
			}
		case r.Worker.Model != "" && cfg.Runtimes[r.Worker.Name].ModelFlag == "":
			problems = append(problems, fmt.Sprintf("%s.runtime: runtime %s has no model_flag, so model %q cannot be passed", field, r.Worker.Name, r.Worker.Model))
		}
		if r.Review {
			switch {
			case r.Validator == nil || r.Validator.Name == "":
				problems = append(problems, field+".review: a review needs a validator runtime: set validator on the task, the flow, its project, or defaults.validator")
			case !known(r.Validator.Name):
				problems = append(problems, fmt.Sprintf("%s.validator: unknown runtime %q", field, r.Validator.Name))
			}
		}
		for _, fb := range r.Retry.Fallback {
			if !known(fb) {
				problems = append(problems, fmt.Sprintf("%s.retry.fallback: unknown runtime %q", field, fb))
			}
		}
		res.Tasks[t.ID] = r
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		problems = slices.Compact(problems)
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	var err error
	if res.Publish, err = resolvePublish(cfg, spec, res.Repo); err != nil {
		return nil, err
	}
	if res.Publish != nil {
		if res.RoundPlan, err = roundPlan(cfg, flowLayer, project, global); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ResolveRequest asks how a task would run: of a submitted flow (Flow), or of
// a flow file's spec not yet submitted (Spec).
type ResolveRequest struct {
	Flow string     `json:"flow,omitempty"`
	Spec *flow.Spec `json:"spec,omitempty"`
	Task string     `json:"task,omitempty"`
}

func (c *Controller) handleResolve(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxSpecRequestSize)
	if err != nil {
		c.refuse(r, "resolve", err)
		return
	}
	// Runtimes are left to Resolve, which says at which level each was
	// named.
	opts := c.flowOptions(nil)
	req, err := decodeResolve(body, opts)
	if err != nil {
		c.refuse(r, "resolve", err)
		return
	}
	var res *Resolution
	switch {
	case req.Spec != nil:
		if res, err = Resolve(c.cfg, req.Spec); err != nil {
			c.refuse(r, "resolve", &requestError{msg: err.Error()})
			return
		}
	case req.Flow != "":
		// A submitted flow keeps what it was resolved with at submission.
		c.store.Read(func(st *projection.State) {
			f := st.Flows[req.Flow]
			if f == nil {
				return
			}
			res = &Resolution{Repo: f.Spec.Repo, MaxParallel: f.MaxParallel, Tasks: map[string]policy.Resolved{}}
			for _, t := range st.FlowTasks(f) {
				if t.Plan != nil {
					res.Tasks[t.ID] = *t.Plan
				}
			}
		})
		if res == nil {
			_ = r.Error(CodeNotFound, "no flow "+req.Flow, nil)
			return
		}
	}
	if req.Task != "" {
		t, ok := res.Tasks[req.Task]
		if !ok {
			_ = r.Error(CodeNotFound, "no task "+req.Task, nil)
			return
		}
		res.Tasks = map[string]policy.Resolved{req.Task: t}
	}
	c.respondJSON(ctx, r, res)
}

// Resolve asks the controller how a flow's tasks run.
func (cl *Client) Resolve(ctx context.Context, req ResolveRequest) (*Resolution, error) {
	if err := req.check(); err != nil {
		return nil, refusedHere(err)
	}
	if req.Spec != nil {
		if err := req.Spec.Validate(flow.Options{Complete: true, RuntimesResolved: true}); err != nil {
			return nil, refusedHere(err)
		}
	}
	var resp Resolution
	err := cl.call(ctx, cl.read(SubjectResolve), req, &resp)
	return &resp, err
}
