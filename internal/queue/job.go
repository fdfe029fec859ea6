package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/tracing"
)

// JobVersion is the job encoding this build writes and reads.
const JobVersion = 1

// Job is one attempt to run, as queued for workers. It carries everything a
// stateless worker needs; workers never read the projection.
type Job struct {
	V       int               `json:"v"`
	Attempt string            `json:"attempt"`
	Flow    string            `json:"flow"`
	Task    string            `json:"task"`
	N       int               `json:"n"`
	Pool    string            `json:"pool"`
	Runtime string            `json:"runtime"`
	Repo    string            `json:"repo"`
	Base    string            `json:"base"`
	Branch  string            `json:"branch"`
	Prompt  string            `json:"prompt"`
	Timeout flow.Duration     `json:"timeout,omitempty"`
	Merge   []event.DepResult `json:"merge,omitempty"`
	// Kind is what to do: run the task's CLI, or build the flow's
	// integration branch from Merge.
	Kind drovertype.JobKind `json:"kind,omitempty"`
	// Model and Args override the runtime's model and add to its arguments.
	Model string   `json:"model,omitempty"`
	Args  []string `json:"args,omitempty"`
	// Checks after the CLI exits.
	Verify        []string      `json:"verify,omitempty"`
	VerifyTimeout flow.Duration `json:"verify_timeout,omitempty"`
	Review        *Review       `json:"review,omitempty"`
	Scope         *flow.Scope   `json:"scope,omitempty"`
}

// Review asks a validator runtime to review the attempt's result.
type Review struct {
	Runtime string   `json:"runtime"`
	Model   string   `json:"model,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Task is the task's own prompt, without retry feedback.
	Task string `json:"task"`
}

// ErrBadJob is wrapped by every job decoding failure.
var ErrBadJob = errors.New("queue: bad job")

// DecodeJob parses and checks a job off the wire.
func DecodeJob(raw []byte) (*Job, error) {
	if len(raw) > MaxJobSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadJob, len(raw))
	}
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJob, err)
	}
	if j.V != JobVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadJob, j.V, JobVersion)
	}
	task := j.Task
	switch j.Kind {
	case drovertype.JobAttempt:
	case drovertype.JobIntegrate:
		task = "x" // an integration job belongs to no task
		if j.Task != "" || j.Attempt != drovertype.IntegrationID(j.Flow, j.N) || j.N < 1 {
			return nil, fmt.Errorf("%w: integration id %q does not match flow %q n %d", ErrBadJob, j.Attempt, j.Flow, j.N)
		}
	default:
		return nil, fmt.Errorf("%w: unknown kind %q", ErrBadJob, j.Kind)
	}
	for name, id := range map[string]string{"flow": j.Flow, "task": task, "pool": j.Pool, "runtime": j.Runtime} {
		if err := drovertype.ValidID(id); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadJob, name, err)
		}
	}
	if j.Review != nil {
		if err := drovertype.ValidID(j.Review.Runtime); err != nil {
			return nil, fmt.Errorf("%w: review runtime: %v", ErrBadJob, err)
		}
		if msg := flow.ModelProblem(j.Review.Model); msg != "" {
			return nil, fmt.Errorf("%w: review model: %s", ErrBadJob, msg)
		}
	}
	// A model reaches the CLI's argv: one starting with '-' is an option.
	if msg := flow.ModelProblem(j.Model); msg != "" {
		return nil, fmt.Errorf("%w: model: %s", ErrBadJob, msg)
	}
	if j.Kind == drovertype.JobAttempt && (j.Attempt != drovertype.AttemptID(j.Flow, j.Task, j.N) || j.N < 1) {
		return nil, fmt.Errorf("%w: attempt id %q does not match flow %q task %q n %d", ErrBadJob, j.Attempt, j.Flow, j.Task, j.N)
	}
	if j.Repo == "" || j.Branch == "" || j.Base == "" {
		return nil, fmt.Errorf("%w: missing repo, base or branch", ErrBadJob)
	}
	// What reaches git is checked here too: a job is outside input even
	// when the controller wrote it (docs/security.md).
	if err := flow.ValidRepo(j.Repo); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJob, err)
	}
	if err := flow.ValidBase(j.Base); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJob, err)
	}
	// A job pushes only its own branch, and merges only result branches of
	// its flow: never main, never another flow's work.
	want := drovertype.AttemptBranch(j.Flow, j.Task, j.N)
	if j.Kind == drovertype.JobIntegrate {
		want = drovertype.IntegrationBranch(j.Flow, j.N)
		// A flow published as a pull request builds every later
		// integration on the pull request's branch: an earlier one of
		// its own (docs/forges.md#rounds).
		if n, ok := drovertype.ParseIntegrationBranch(j.Flow, j.Branch); ok && n <= j.N {
			want = j.Branch
		}
	}
	if j.Branch != want {
		return nil, fmt.Errorf("%w: branch %q is not the attempt's own branch %q", ErrBadJob, j.Branch, want)
	}
	for i := range j.Merge {
		m := &j.Merge[i]
		if m.Branch == "" && m.N > 0 && drovertype.ValidID(m.Task) == nil {
			m.Branch = drovertype.AttemptBranch(j.Flow, m.Task, m.N)
		}
		m.N = 0
		if !isResultBranch(j.Flow, m.Branch) {
			return nil, fmt.Errorf("%w: merge branch %q is not a result branch of flow %s (drover/%s/TASK/N)", ErrBadJob, m.Branch, j.Flow, j.Flow)
		}
	}
	if err := flow.ValidScope(j.Scope); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJob, err)
	}
	return &j, nil
}

// isResultBranch reports whether b is a result branch of flowID's tasks.
func isResultBranch(flowID, b string) bool {
	_, _, ok := drovertype.ParseAttemptBranch(flowID, b)
	return ok
}

// resultAttempt returns n when branch is AttemptBranch(flowID, task, n).
func resultAttempt(flowID, task, branch string) (int, bool) {
	t, n, ok := drovertype.ParseAttemptBranch(flowID, branch)
	return n, ok && t == task
}

// PublishJob queues j for its pool and runtime; the attempt id is the
// Nats-Msg-Id so a decision republished after a crash queues it once.
func PublishJob(ctx context.Context, js jetstream.JetStream, j *Job) error {
	msg, err := jobMsg(ctx, js, j)
	if err != nil {
		return err
	}
	// The job carries its publish span's context, a child of the attempt's
	// span: the worker's spans continue it.
	ctx, end := tracePublish(ctx, msg, jobSpan(j, msg))
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(j.Attempt), jetstream.WithExpectStream(AttemptsStream))
	end(ack, err)
	if err != nil {
		return fmt.Errorf("queue: publish job %s: %w", j.Attempt, err)
	}
	return nil
}

// jobMsg is j as a message for its pool's and runtime's subject, its body
// in the jobs store when too large for a message (jobBody).
func jobMsg(ctx context.Context, js jetstream.JetStream, j *Job) (*nats.Msg, error) {
	data, err := encodeJob(j)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: AttemptSubject(j.Pool, j.Runtime), Data: data, Header: nats.Header{}}
	if err := jobBody(ctx, js, j.Attempt, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// encodeJob is j as the wire carries it.
func encodeJob(j *Job) ([]byte, error) {
	j.V = JobVersion
	// A result branch to merge travels as its attempt number: the branch
	// is named by it, and an integration of some 8,000 tasks stays a
	// message.
	wire := *j
	wire.Merge = make([]event.DepResult, len(j.Merge))
	for i, m := range j.Merge {
		if n, ok := resultAttempt(j.Flow, m.Task, m.Branch); ok {
			m.Branch, m.N = "", n
		}
		wire.Merge[i] = m
	}
	data, err := json.Marshal(&wire)
	if err != nil {
		return nil, fmt.Errorf("queue: encode job %s: %w", j.Attempt, err)
	}
	return data, nil
}

// jobSpan names a job's publish span. Pools and runtimes are few: the
// subject itself names it.
func jobSpan(j *Job, msg *nats.Msg) func() (tracing.Message, tracing.Owner) {
	return func() (tracing.Message, tracing.Owner) {
		return tracing.Message{Template: AttemptsTemplate, Destination: msg.Subject, ID: j.Attempt}, JobOwner(j)
	}
}
