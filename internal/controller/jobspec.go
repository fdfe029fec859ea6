package controller

import (
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// jobSpec is a job the decisions call for: what a worker is to run, as
// plain values. The decision step returns these and knows nothing of the
// queue; decide turns each into a queue.Job when it publishes the round,
// as raft's Ready hands back messages for the application to send.
type jobSpec struct {
	Kind    drovertype.JobKind // run the task's CLI, or build the flow's integration branch
	Attempt string
	Flow    string
	Task    string
	N       int
	Pool    string
	Runtime string
	Model   string
	Args    []string
	Repo    string
	Base    string
	Branch  string
	Prompt  string
	Timeout flow.Duration
	Merge   []event.DepResult
	// Checks after the CLI exits.
	Verify        []string
	VerifyTimeout flow.Duration
	Review        *reviewSpec
	Scope         *flow.Scope
}

// reviewSpec asks a validator runtime to review the attempt's result;
// Task is the task's own prompt, without retry feedback.
type reviewSpec struct {
	Runtime string
	Model   string
	Args    []string
	Task    string
}

// queueJob is j as the queue carries it.
func (j *jobSpec) queueJob() *queue.Job {
	q := &queue.Job{
		Kind: j.Kind, Attempt: j.Attempt, Flow: j.Flow, Task: j.Task, N: j.N, Pool: j.Pool,
		Runtime: j.Runtime, Model: j.Model, Args: j.Args, Repo: j.Repo, Base: j.Base, Branch: j.Branch,
		Prompt: j.Prompt, Timeout: j.Timeout, Merge: j.Merge, Verify: j.Verify, VerifyTimeout: j.VerifyTimeout,
		Scope: j.Scope,
	}
	if r := j.Review; r != nil {
		q.Review = &queue.Review{Runtime: r.Runtime, Model: r.Model, Args: r.Args, Task: r.Task}
	}
	return q
}
