package drovertype

// The states of flows, tasks, attempts and integrations, as the projection
// records them and operators see them.

// FlowState is where a flow is in its life.
type FlowState string

// Flow states.
const (
	FlowRunning   FlowState = "running"
	FlowSucceeded FlowState = "succeeded"
	FlowFailed    FlowState = "failed"
	FlowCancelled FlowState = "cancelled"
)

// Terminal reports whether the flow is finished.
func (s FlowState) Terminal() bool {
	return s == FlowSucceeded || s == FlowFailed || s == FlowCancelled
}

// TaskState is where a task is in its life.
type TaskState string

// Task states.
const (
	TaskPending   TaskState = "pending"   // waiting for dependencies
	TaskScheduled TaskState = "scheduled" // an attempt is queued
	TaskRunning   TaskState = "running"   // an attempt is claimed, or awaits a decision
	TaskRetrying  TaskState = "retrying"  // a retry is scheduled for Task.Retry.DueAt
	TaskSucceeded TaskState = "succeeded"
	TaskFailed    TaskState = "failed"
	TaskBlocked   TaskState = "blocked" // a dependency failed or was cancelled
	TaskCancelled TaskState = "cancelled"
)

// Terminal reports whether the task will change no more without an operator.
func (s TaskState) Terminal() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskBlocked || s == TaskCancelled
}

// AttemptState is where an attempt is in its life.
type AttemptState string

// Attempt states.
const (
	AttemptScheduled AttemptState = "scheduled" // queued for a worker
	AttemptClaimed   AttemptState = "claimed"
	AttemptSucceeded AttemptState = "succeeded"
	AttemptFailed    AttemptState = "failed"
	// Withdrawn: the controller took the queued attempt back before any
	// worker ran it (its runtime began cooling down, or its flow's budget
	// was spent); it does not count against the task's attempts.
	AttemptWithdrawn AttemptState = "withdrawn"
)

// Terminal reports whether the attempt has ended: reported, or withdrawn.
func (s AttemptState) Terminal() bool {
	return s == AttemptSucceeded || s == AttemptFailed || s == AttemptWithdrawn
}

// IntegrationState is where a flow's integration branch is.
type IntegrationState string

// Integration states.
const (
	IntegrationScheduled IntegrationState = "scheduled"
	IntegrationSucceeded IntegrationState = "succeeded"
	IntegrationFailed    IntegrationState = "failed"
)
