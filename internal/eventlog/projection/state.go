package projection

import (
	"reflect"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// Flow is the projection of one submitted flow.
type Flow struct {
	ID          string               `json:"id"`
	State       drovertype.FlowState `json:"state"`
	SubmittedAt time.Time            `json:"submitted_at"`
	CompletedAt time.Time            `json:"completed_at,omitzero"`
	// Order and Spec never change once the flow is recorded: they are a
	// record of their own (flowDefinition), written once, so that the
	// flow's record, which every report's spend changes, stays small
	// however many tasks the flow has. Omitted when zero, in that record.
	Order []string  `json:"order,omitempty"` // task ids, dependencies first
	Spec  flow.Spec `json:"spec,omitzero"`
	// MaxParallel bounds the flow's live attempts (resolved at submission);
	// 0 means no limit.
	MaxParallel int `json:"max_parallel,omitempty"`
	// Round counts the times an operator reopened the finished flow (a
	// retry); decision ids that happen once per flow life carry it.
	Round       int          `json:"round,omitempty"`
	Paused      bool         `json:"paused,omitempty"`
	Cancel      *Cancel      `json:"cancel,omitempty"`
	Integration *Integration `json:"integration,omitempty"`
	// Budget caps what the flow's attempts may spend (resolved at
	// submission, raised by an operator); Spend is what they reported.
	Budget *flow.Budget `json:"budget,omitempty"`
	Spend  *Spend       `json:"spend,omitempty"`
	// Publish is how the flow is published when it ends, RoundPlan how a
	// review round's tasks run (resolved at submission); PR is its pull
	// request once one was asked for (pullrequest.go).
	Publish   *flow.Publish    `json:"publish,omitempty"`
	RoundPlan *policy.Resolved `json:"round_plan,omitempty"`
	PR        *PullRequest     `json:"pull_request,omitempty"`
}

// Cancel records an operator's cancel request.
type Cancel struct {
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Integration is the flow's branch that merges its succeeded tasks.
type Integration struct {
	N       int                         `json:"n"`
	State   drovertype.IntegrationState `json:"state"`
	Branch  string                      `json:"branch"`
	Runtime string                      `json:"runtime"`
	Pool    string                      `json:"pool"`
	Merge   []event.DepResult           `json:"merge"`
	// Base is what the build starts from, "" for the flow's base (a
	// published flow's builds start from its pull request's branch).
	Base   string           `json:"base,omitempty"`
	Commit string           `json:"commit,omitempty"`
	Error  *event.ErrorInfo `json:"error,omitempty"`
}

// Task is the projection of one task of a flow.
type Task struct {
	Flow         string               `json:"flow"`
	ID           string               `json:"id"`
	State        drovertype.TaskState `json:"state"`
	DependsOn    []string             `json:"depends_on,omitempty"`
	Runtime      string               `json:"runtime"`
	Attempts     int                  `json:"attempts"`
	Attempt      string               `json:"attempt,omitempty"` // the current attempt
	ResultBranch string               `json:"result_branch,omitempty"`
	ResultCommit string               `json:"result_commit,omitempty"`
	BlockedBy    string               `json:"blocked_by,omitempty"`
	Error        *event.ErrorInfo     `json:"error,omitempty"`
	UpdatedAt    time.Time            `json:"updated_at"`
	// Plan is what the task runs with, resolved when the flow was submitted.
	Plan *policy.Resolved `json:"plan,omitempty"`
	// Retry is the scheduled retry while the task is retrying.
	Retry *PendingRetry `json:"retry,omitempty"`
	// RetryBase is the attempt count at the last operator retry: the retry
	// budget counts attempts after it.
	RetryBase int `json:"retry_base,omitempty"`
	// Round counts operator retries of the task.
	Round int `json:"round,omitempty"`
	// CancelRequested: an operator asked to cancel the task.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Budget caps what the task's attempts may spend (its flow file's,
	// raised by an operator); Spend is what they reported.
	Budget *flow.Budget `json:"budget,omitempty"`
	Spend  *Spend       `json:"spend,omitempty"`
	// Wait is why the task, ready to start, does not (task_waiting);
	// Waiting says whether it still holds. Waits counts the waits recorded.
	Wait  *TaskWait `json:"wait,omitempty"`
	Waits int       `json:"waits,omitempty"`
	// A task of a review round is not in the flow file: Prompt is its
	// prompt, Base what it starts from (the pull request's branch), and
	// ReviewRound the round's number.
	Prompt      string `json:"prompt,omitempty"`
	Base        string `json:"base,omitempty"`
	ReviewRound int    `json:"review_round,omitempty"`
}

// PendingRetry is a retry the policy scheduled (runtime_recovery_scheduled).
type PendingRetry struct {
	N        int                 `json:"n"`
	Strategy drovertype.Strategy `json:"strategy"`
	Runtime  string              `json:"runtime"`
	Model    string              `json:"model,omitempty"`
	DueAt    time.Time           `json:"due_at"`
	Reason   string              `json:"reason"`
}

// Attempt is the projection of one run of a task.
type Attempt struct {
	ID      string   `json:"id"`
	Flow    string   `json:"flow"`
	Task    string   `json:"task"`
	N       int      `json:"n"`
	Runtime string   `json:"runtime"`
	Model   string   `json:"model,omitempty"`
	Args    []string `json:"args,omitempty"`
	Pool    string   `json:"pool"`
	Branch  string   `json:"branch"`
	// Prompt is the prompt composed with the previous attempt's feedback;
	// empty on a first attempt, which runs the task's prompt as written.
	Prompt      string                  `json:"prompt,omitempty"`
	Timeout     flow.Duration           `json:"timeout,omitempty"`
	Merge       []event.DepResult       `json:"merge,omitempty"`
	State       drovertype.AttemptState `json:"state"`
	Phase       event.Type              `json:"phase,omitempty"` // the last lifecycle event folded
	Epoch       uint64                  `json:"epoch"`
	Worker      string                  `json:"worker,omitempty"`
	Worktree    string                  `json:"worktree,omitempty"`
	BaseCommit  string                  `json:"base_commit,omitempty"`
	Pid         int                     `json:"pid,omitempty"`
	DiffStat    string                  `json:"diff_stat,omitempty"`
	ScheduledAt time.Time               `json:"scheduled_at"`
	ClaimedAt   time.Time               `json:"claimed_at,omitzero"`
	EndedAt     time.Time               `json:"ended_at,omitzero"`
	// Report is what the attempt reported, without its stdout tail: up to
	// 8 KiB per attempt that nothing the controller decides reads, and
	// most of the projection's bytes and memory otherwise (72 of 92 MB
	// folding the benchmark's flows). The tail stays in the report event,
	// ReportEventID, which the EVENTS stream keeps: the controller's report
	// API reads it whole. The stderr tail, which retry feedback quotes, is
	// kept.
	Report        *event.Report    `json:"report,omitempty"`
	ReportEventID string           `json:"report_event,omitempty"`
	Error         *event.ErrorInfo `json:"error,omitempty"`  // set by runtime_error_classified
	Fenced        int              `json:"fenced,omitempty"` // events ignored from superseded claims
	// Verification is what the checks after the run found.
	Verification *event.Verification `json:"verification,omitempty"`
	// Probe lists the cooldowns this attempt was the first to try after
	// they ended (event.CooldownKey).
	Probe []string `json:"probe,omitempty"`
	// Withdrawn says why the controller took the attempt back before it ran.
	Withdrawn string `json:"withdrawn,omitempty"`
	// UnservedBeforeMS is how long no live worker had served its runtime
	// in its pool, in all, when it was scheduled (Placement.UnservedBy):
	// its placement timeout counts what is added after.
	UnservedBeforeMS int64 `json:"unserved_before_ms,omitempty"`
}

// SubmittedPart is a part of a flow's tasks (flow_tasks_submitted) folded
// ahead of the flow_submitted that completes it.
type SubmittedPart struct {
	Flow string `json:"flow"`
	event.FlowTasksSubmittedData
}

// Poison records an event that could not be folded: undecodable, or
// checked and refused (doc.go). It is part of the projection so that a
// rebuild records the same poison at the same sequence. Size is the
// message's, in bytes.
type Poison struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
	Size   int    `json:"size"`
}

// MaxPoisons is how many poison records the projection keeps in full: the
// latest. Anyone who may publish on the events subjects can send junk, and
// junk must not grow the controller: 20,000 junk events are a count and
// the last MaxPoisons records (each at most maxPoisonReason bytes of
// reason), not 20,000 records. The junk itself stays on the stream, and a
// copy of each is parked in DROVER_DEADLETTER.
const MaxPoisons = 1000

// maxPoisonReason bounds a poison record's reason.
const maxPoisonReason = 512

// State is the whole projection in memory. Apply mutates it and marks the
// records it touched so the store can persist exactly those.
type State struct {
	Flows    map[string]*Flow
	Tasks    map[string]*Task // key: flow + "/" + task
	Attempts map[string]*Attempt
	Seen     map[string]uint64 // event id -> sequence that folded it
	// Poisons are the last MaxPoisons poison records, by sequence;
	// PoisonCount counts every poison event ever folded.
	Poisons     map[uint64]*Poison
	PoisonCount int
	// Parts holds the parts of large flows until their flow_submitted.
	Parts map[string]*SubmittedPart // key: partKey
	// Cooldowns are the limits the fleet has met, by event.CooldownKey;
	// a released one stays until the next limit in its scope replaces it.
	Cooldowns map[string]*Cooldown
	// Placements are what the log says of the workers serving a runtime
	// in a pool, by event.PlacementKey: those an attempt has waited for.
	Placements map[string]*Placement
	// Leadership is the latest election folded; nil before any
	// (leadership.go).
	Leadership *Leadership
	// seq is the stream sequence of the event being folded.
	seq   uint64
	dirty map[string]struct{}
	// seenDirty are the ids seen since ForgetChanges, in order; their
	// records are not in dirty (ChangedRecords).
	seenDirty []seenID
	// enc is ChangedRecords' buffer, reused from record to record.
	enc []byte
	// poisonSeqs are the keys of Poisons in order, oldest first.
	poisonSeqs []uint64
	// plans are the last distinct plans tasks were given (sharedPlan).
	plans []*policy.Resolved
	// index is what the decisions read of each flow (index.go).
	index *taskIndex
	// downstream is what the fold reads of each flow's dependencies
	// (dependents.go); made as failures need it.
	downstream map[string]*dependents
	// onMark is called with each record key marked (OnMark).
	onMark func(key string)
}

// seenID is an event id seen, and the sequence it was folded at.
type seenID struct {
	id  string
	seq uint64
}

// sharedPlans bounds the distinct plans sharedPlan compares a new one with.
const sharedPlans = 4

// sharedPlan returns a plan equal to p that other tasks have already, or
// p. A flow's tasks mostly resolve to the same few plans, and a copy per
// task (about 0.6 KB, its map of where each retry setting came from
// included) was most of what a 10,000-task flow's tasks held. Plans are
// never changed after submission, so tasks can share them.
func (s *State) sharedPlan(p *policy.Resolved) *policy.Resolved {
	for _, q := range s.plans {
		if reflect.DeepEqual(p, q) {
			return q
		}
	}
	if len(s.plans) == sharedPlans {
		copy(s.plans, s.plans[1:])
		s.plans = s.plans[:sharedPlans-1]
	}
	s.plans = append(s.plans, p)
	return p
}

// NewState returns an empty projection.
func NewState() *State {
	return &State{
		Flows:     map[string]*Flow{},
		Tasks:     map[string]*Task{},
		Attempts:  map[string]*Attempt{},
		Seen:      map[string]uint64{},
		Poisons:   map[uint64]*Poison{},
		Parts:     map[string]*SubmittedPart{},
		dirty:     map[string]struct{}{},
		Cooldowns: map[string]*Cooldown{},

		Placements: map[string]*Placement{},
		index:      newTaskIndex(),
	}
}

// TaskKey is the key of a task in State.Tasks.
func TaskKey(flowID, task string) string { return flowID + "/" + task }

// Task returns a task of a flow.
func (s *State) Task(flowID, task string) *Task { return s.Tasks[TaskKey(flowID, task)] }

// FlowTasks returns a flow's tasks in dependency order.
func (s *State) FlowTasks(f *Flow) []*Task {
	out := make([]*Task, 0, len(f.Order))
	for _, id := range f.Order {
		if t := s.Task(f.ID, id); t != nil {
			out = append(out, t)
		}
	}
	return out
}
