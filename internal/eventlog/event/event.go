package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/plan"
)

// Version is the envelope version this build writes and folds.
const Version = 1

// MaxEventSize bounds one encoded event; larger messages are poison.
const MaxEventSize = 1 << 20

// SubjectPrefix begins the subject of every event on the EVENTS stream.
const SubjectPrefix = "drover.events."

// Subject is the one subject an event of flowID and typ is published on:
// one token for the flow, one for the type, so `controller events FLOW`
// filters by flow. The fold checks an event against it.
func Subject(flowID string, typ Type) string { return SubjectPrefix + flowID + "." + string(typ) }

// Type names an event, in snake_case; docs/design.md#one-attempt says which
// phase or decision records each.
type Type string

// Event types. The controller writes the flow and decision events; workers
// write the attempt lifecycle events.
const (
	FlowSubmitted           Type = "flow_submitted"
	FlowCompleted           Type = "flow_completed"
	AttemptScheduled        Type = "attempt_scheduled"
	AttemptClaimed          Type = "attempt_claimed"
	AdapterInitialized      Type = "adapter_initialized"
	PrepareCompleted        Type = "prepare_completed"
	RuntimeStarted          Type = "runtime_started"
	RuntimeOutputChunk      Type = "runtime_output_chunk" // on the OUTPUT stream, never folded
	RuntimeExited           Type = "runtime_exited"
	FileModified            Type = "file_modified"
	DiffComputed            Type = "diff_computed"
	CheckpointCommitCreated Type = "checkpoint_commit_created"
	RuntimeTerminated       Type = "runtime_terminated"
	AttemptReported         Type = "attempt_reported"
	RuntimeErrorClassified  Type = "runtime_error_classified"
	TaskFailed              Type = "task_failed"

	// The attempt's checks after the CLI exited: verification commands,
	// the validator's review and the scope check (worker).
	VerificationCompleted Type = "verification_completed"
	// The policy's decision to run a failed task again (controller).
	RuntimeRecoveryScheduled Type = "runtime_recovery_scheduled"
	// Operator requests (controller API) and what the controller makes of them.
	CancelRequested    Type = "cancel_requested"
	TaskCancelled      Type = "task_cancelled"
	FlowPaused         Type = "flow_paused"
	FlowResumed        Type = "flow_resumed"
	TaskRetryRequested Type = "task_retry_requested"
	// The flow's integration branch: scheduled by the controller, built by a worker.
	AttemptAbandoned Type = "attempt_abandoned"
	// The controller's finding that an attempt's worker went silent for a
	// lease: the attempt failed with WORKER_LOST.
	AttemptLost Type = "attempt_lost"
	// A part of a flow too large for one event: some of its tasks, ahead of
	// the flow_submitted that names how many parts there are (controller).
	FlowTasksSubmitted   Type = "flow_tasks_submitted"
	IntegrationScheduled Type = "integration_scheduled"
	FlowIntegrated       Type = "flow_integrated"

	// A provider's limit as a fact about the fleet (controller): a runtime,
	// a model or a credential cools down, and its probe's success releases
	// it (docs/design.md#cooldowns).
	CooldownStarted  Type = "cooldown_started"
	CooldownReleased Type = "cooldown_released"
	// The controller took back a queued attempt before any worker ran it.
	AttemptWithdrawn Type = "attempt_withdrawn"
	// A task that could start waits, and why (controller).
	TaskWaiting Type = "task_waiting"
	// An operator set a flow's or a task's budget (controller API).
	BudgetSet Type = "budget_set"
	// Whether live workers serve a runtime in a pool, as a fact about the
	// fleet that the placement timeout counts from (controller), and the
	// controller taking back a queued attempt no worker took for that
	// timeout: it failed with NO_WORKER (docs/design.md#placement).
	PlacementChanged Type = "placement_changed"
	AttemptUnplaced  Type = "attempt_unplaced"
	// A controller won the leadership and opens its term: from here on the
	// log folds only decisions of its epoch (docs/design.md#leadership-and-fencing).
	LeaderElected Type = "leader_elected"
)

// LeadershipFlow is the flow token of the leadership events: they are about
// no flow, and a submitted flow's id always ends in "-" and a random
// suffix, so no flow is ever named so. `controller events leadership`
// lists the elections.
const LeadershipFlow = "leadership"

// Event is the envelope of everything on the EVENTS stream. ID is unique per
// logical event and deterministic for decisions, so a republished event is
// recognised and folded once.
type Event struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Type    Type      `json:"type"`
	Time    time.Time `json:"time"`
	Flow    string    `json:"flow"`
	Task    string    `json:"task,omitempty"`
	Attempt string    `json:"attempt,omitempty"`
	Epoch   uint64    `json:"epoch,omitempty"`
	// LeaderEpoch is the epoch of the leader that decided the event: every
	// controller decision carries it, stamped where the leader publishes;
	// the fold ignores a decision of an epoch older than the latest
	// leader_elected. Events a worker writes carry none.
	LeaderEpoch uint64          `json:"leader_epoch,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// ErrDecode is wrapped by every decoding failure.
var ErrDecode = errors.New("event: undecodable event")

// New builds an event with its payload encoded.
func New(id string, typ Type, at time.Time, flowID, task, attempt string, epoch uint64, data any) (*Event, error) {
	ev := &Event{V: Version, ID: id, Type: typ, Time: at.UTC(), Flow: flowID, Task: task, Attempt: attempt, Epoch: epoch}
	if data != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			return nil, fmt.Errorf("event: encode %s payload: %w", typ, err)
		}
		ev.Data = raw
	}
	return ev, nil
}

// Encode returns the wire form of ev.
func (ev *Event) Encode() ([]byte, error) { return json.Marshal(ev) }

// Decode parses and checks one event off the wire.
func Decode(raw []byte) (*Event, error) {
	if len(raw) > MaxEventSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrDecode, len(raw), MaxEventSize)
	}
	var ev Event
	if err := unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	switch {
	case ev.V != Version:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrDecode, ev.V, Version)
	case ev.ID == "":
		return nil, fmt.Errorf("%w: missing id", ErrDecode)
	case ev.Type == "":
		return nil, fmt.Errorf("%w: missing type", ErrDecode)
	case ev.Flow == "":
		return nil, fmt.Errorf("%w: missing flow", ErrDecode)
	}
	return &ev, nil
}

// unmarshal decodes events off the wire with the JSON v2 decoder (the
// go-json-experiment module that is the standard library's encoding/json/v2
// under GOEXPERIMENT=jsonv2): the fold spends most of its time decoding, and
// v2 does it 3 to 4 times faster than encoding/json (docs/design.md#large-flows).
// It is also stricter, which suits a wire format: duplicate member names,
// invalid UTF-8 and members that differ from a field's name only in case are
// errors, so such a message is poison. What Drover writes (encoding/json)
// has none of them. Events are still encoded with encoding/json.
func unmarshal(data []byte, v any) error {
	if err := jsonv2.Unmarshal(data, v); err != nil {
		return stableError{err}
	}
	return nil
}

// stableError words a decoding error the same way in every process. The v2
// module deliberately picks "cannot" or "unable to" at random once per
// process, so that nobody depends on its wording; but a poison reason is
// stored in the projection, and a rebuild in another process must write the
// same bytes.
type stableError struct{ err error }

func (e stableError) Error() string {
	return strings.ReplaceAll(e.err.Error(), "json: unable to ", "json: cannot ")
}

func (e stableError) Unwrap() error { return e.err }

// Payload decodes ev.Data into v.
func (ev *Event) Payload(v any) error {
	if len(ev.Data) == 0 {
		return fmt.Errorf("%w: %s %s has no payload", ErrDecode, ev.Type, ev.ID)
	}
	if err := unmarshal(ev.Data, v); err != nil {
		return fmt.Errorf("%w: %s %s payload: %v", ErrDecode, ev.Type, ev.ID, err)
	}
	return nil
}

// FlowSubmittedData records an accepted flow.
type FlowSubmittedData struct {
	Spec flow.Spec `json:"spec"`
	// Plan is each task's resolved runtimes and policy, by task id, so the
	// flow keeps what it was accepted with whatever the config says later.
	Plan map[string]plan.Resolved `json:"plan,omitempty"`
	// MaxParallel is the flow's resolved concurrency limit (0: none).
	MaxParallel int `json:"max_parallel,omitempty"`
	// Parts, when above 0, says the flow's tasks and their plans are not
	// here (Spec.Tasks is empty) but in that many flow_tasks_submitted
	// events, parts 1..Parts, which come before this one in the log.
	Parts int `json:"parts,omitempty"`
	// Budget is the flow's resolved budget (its own, else its project's,
	// else the configured default); nil: none.
	Budget *flow.Budget `json:"budget,omitempty"`
	// Publish is how the flow is published when it ends, resolved (its
	// own over its project's, the forge and repository inferred, defaults
	// filled in); RoundPlan how a review round's tasks run. nil: neither.
	Publish   *flow.Publish  `json:"publish,omitempty"`
	RoundPlan *plan.Resolved `json:"round_plan,omitempty"`
}

// FlowTasksSubmittedData is one part of a large flow's tasks, in the order
// of the flow file, with their plans.
type FlowTasksSubmittedData struct {
	Part  int                      `json:"part"`
	Tasks []flow.Task              `json:"tasks"`
	Plan  map[string]plan.Resolved `json:"plan,omitempty"`
}

// FlowCompletedData is the controller's decision that every task is terminal.
type FlowCompletedData struct {
	State drovertype.FlowState `json:"state"`
	// Round is the flow's round the decision was made in; a decision from
	// before an operator retry reopened the flow is stale.
	Round int `json:"round,omitempty"`
}

// DepResult is a dependency's result branch merged into a dependent attempt.
type DepResult struct {
	Task   string `json:"task"`
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit"`
	// N is the attempt whose result branch this is. Jobs carry it instead
	// of the branch, which it names (see queue.PublishJob): a flow's
	// integration lists every task that succeeded.
	N int `json:"n,omitempty"`
}

// AttemptScheduledData is the controller's decision to run a task once more.
type AttemptScheduledData struct {
	N       int           `json:"n"`
	Runtime string        `json:"runtime"`
	Pool    string        `json:"pool"`
	Branch  string        `json:"branch"`
	Timeout flow.Duration `json:"timeout,omitempty"`
	Merge   []DepResult   `json:"merge,omitempty"`
	Model   string        `json:"model,omitempty"`
	Args    []string      `json:"args,omitempty"`
	// Prompt is set on a retry: the task's prompt with the feedback of the
	// attempt before.
	Prompt string `json:"prompt,omitempty"`
	// Probe lists the cooldowns (CooldownKey) whose end this attempt tests:
	// it goes first, and its outcome releases or extends them.
	Probe []string `json:"probe,omitempty"`
}

// AttemptAbandonedData is the controller's record that a queued attempt of a
// cancelled task will never run: no worker held it, and its claim is revoked.
type AttemptAbandonedData struct {
	Reason string `json:"reason"`
}

// AttemptLostData records that the worker holding an attempt at
// Event.Epoch stopped renewing its claim for a whole lease; the controller
// revoked the claim, so that worker can publish nothing more that counts.
type AttemptLostData struct {
	Worker string `json:"worker"`
	// LeaseMS is the lease that lapsed.
	LeaseMS int64  `json:"lease_ms"`
	Reason  string `json:"reason"`
}

// LeaderElectedData names the controller whose term begins at the event's
// LeaderEpoch.
type LeaderElectedData struct {
	Controller string `json:"controller"`
}

// AttemptClaimedData says which worker holds the attempt, at Event.Epoch.
type AttemptClaimedData struct {
	Worker string `json:"worker"`
	Host   string `json:"host,omitempty"`
}

// AdapterInitializedData is the Initialize phase's outcome.
type AdapterInitializedData struct {
	Adapter string `json:"adapter"`
	Binary  string `json:"binary"`
	Version string `json:"version,omitempty"`
}

// PrepareCompletedData is the Prepare phase's outcome.
type PrepareCompletedData struct {
	Worktree   string `json:"worktree"`
	Branch     string `json:"branch"`
	BaseCommit string `json:"base_commit"`
	Baseline   string `json:"baseline"`
}

// RuntimeStartedData records the launched process.
type RuntimeStartedData struct {
	Pid  int      `json:"pid"`
	Argv []string `json:"argv"`
	// Sandbox is how the CLI is confined, as Report.Sandbox says.
	Sandbox string `json:"sandbox,omitempty"`
}

// OutputChunkData is a piece of the CLI's output (OUTPUT stream).
type OutputChunkData struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Text   string `json:"text"`
}

// RuntimeExitedData records how the process ended.
type RuntimeExitedData struct {
	Outcome    string `json:"outcome"`
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// Denied is what the sandbox refused the CLI, as Report.SandboxDenied.
	Denied []string `json:"denied,omitempty"`
}

// FileModifiedData is one changed path.
type FileModifiedData struct {
	Path   string `json:"path"`
	Change string `json:"change"` // created | modified | deleted
}

// DiffComputedData is the aggregate diff, bounded; the full patch size is kept.
type DiffComputedData struct {
	Created       []string `json:"created,omitempty"`
	Modified      []string `json:"modified,omitempty"`
	Deleted       []string `json:"deleted,omitempty"`
	Stat          string   `json:"stat,omitempty"`
	Diff          string   `json:"diff,omitempty"`
	DiffBytes     int      `json:"diff_bytes"`
	DiffTruncated bool     `json:"diff_truncated,omitempty"`
}

// Commit is a commit the runtime or Drover made.
type Commit struct {
	SHA     string `json:"sha"`
	Subject string `json:"subject"`
}

// CheckpointCommitCreatedData records the checkpoint commit and the runtime's own commits.
type CheckpointCommitCreatedData struct {
	Commit         string   `json:"commit"`
	RuntimeCommits []Commit `json:"runtime_commits,omitempty"`
}

// ErrorInfo is a failure normalised into an error class
// (docs/runtimes.md#error-classes says which part of Drover gives which).
type ErrorInfo struct {
	Class        drovertype.ErrorClass `json:"class"`
	Category     drovertype.Category   `json:"category,omitempty"`
	Message      string                `json:"message"`
	Recoverable  bool                  `json:"recoverable"`
	Status       int                   `json:"status,omitempty"`         // HTTP status the CLI reported
	RetryAfterMS int64                 `json:"retry_after_ms,omitempty"` // how long the CLI said to wait
	ResetAt      time.Time             `json:"reset_at,omitzero"`        // when the CLI said a quota resets
}

// Usage is token usage as the CLI reported it. A count or cost the CLI
// did not report is nil and absent on the wire: unknown, not 0 (copilot
// reports no tokens, gemini no cache writes, codex and gemini no cost).
// Events written before this distinction carry input_tokens and
// output_tokens always, so an old 0 may mean unknown.
type Usage struct {
	Model            string   `json:"model,omitempty"`
	InputTokens      *int64   `json:"input_tokens,omitempty"`
	OutputTokens     *int64   `json:"output_tokens,omitempty"`
	CacheReadTokens  *int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens *int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          *float64 `json:"cost_usd,omitempty"`
}

// Known reports whether the CLI reported any token count or cost.
func (u *Usage) Known() bool {
	return u != nil && (u.InputTokens != nil || u.OutputTokens != nil || u.CacheReadTokens != nil ||
		u.CacheWriteTokens != nil || u.CostUSD != nil)
}

// Report is an attempt's ExecutionReport: how the CLI ended, what it
// printed and changed, its usage, its checks and its error.
type Report struct {
	Success        bool       `json:"success"`
	ExitCode       int        `json:"exit_code"`
	Signal         string     `json:"signal,omitempty"`
	DurationMS     int64      `json:"duration_ms"`
	StdoutTail     string     `json:"stdout_tail,omitempty"`
	StderrTail     string     `json:"stderr_tail,omitempty"`
	FilesCreated   []string   `json:"files_created,omitempty"`
	FilesModified  []string   `json:"files_modified,omitempty"`
	FilesDeleted   []string   `json:"files_deleted,omitempty"`
	CommitsCreated []string   `json:"commits_created,omitempty"`
	DiffSummary    string     `json:"diff_summary,omitempty"`
	Branch         string     `json:"branch,omitempty"`
	Commit         string     `json:"commit,omitempty"`
	Worktree       string     `json:"worktree,omitempty"`
	Error          *ErrorInfo `json:"error,omitempty"`
	// What the CLI's own output said, read best effort by its parser.
	Usage     *Usage `json:"usage,omitempty"`
	FinalText string `json:"final_text,omitempty"`
	Unparsed  int    `json:"unparsed_lines,omitempty"`
	// ToolCalls counts the tool calls the CLI reported, by tool name.
	ToolCalls map[string]int `json:"tool_calls,omitempty"`
	// Turns counts an in-process runtime's model answers; Refusals are
	// what it refused the agent (a write outside the task's scope, a path
	// outside the worktree), one line each: prevented, not found after.
	Turns    int      `json:"turns,omitempty"`
	Refusals []string `json:"refusals,omitempty"`
	// Artifacts in the object store: the full (masked) log, the patch, and
	// the CLI's output parsed into normalised events (JSON lines).
	EventsObject string `json:"events_object,omitempty"`
	LogObject    string `json:"log_object,omitempty"`
	LogBytes     int64  `json:"log_bytes,omitempty"`
	PatchObject  string `json:"patch_object,omitempty"`
	// Verification is what the checks after the run found, when the task
	// has any; ScopeViolations lists changes outside the task's scope.
	Verification    *Verification `json:"verification,omitempty"`
	ScopeViolations []string      `json:"scope_violations,omitempty"`
	// Credential fingerprints the credentials the CLI was given (never the
	// secret: a short hash of the values of its key variables), so that a
	// rate limit can cool down every runtime that shares them; "" when it
	// was given none in its environment.
	Credential string `json:"credential,omitempty"`
	// Sandbox is how the CLI, its checks and its validator were confined:
	// "landlock ABI 7", or "off: …" with why (worker.sandbox is off, or
	// controller dev on a kernel without Landlock).
	Sandbox string `json:"sandbox,omitempty"`
	// SandboxDenied is what the sandbox refused the CLI, as its output
	// said: "PATH: LINE" or "tcp/PORT: LINE" (internal/sandbox Denials).
	SandboxDenied []string `json:"sandbox_denied,omitempty"`
}

// CommandResult is one verification command's outcome.
type CommandResult struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Output     string `json:"output,omitempty"` // stdout and stderr interleaved, head and tail
}

// ReviewResult is the validator runtime's verdict.
type ReviewResult struct {
	Runtime string   `json:"runtime"`
	Passed  bool     `json:"passed"`
	Reasons []string `json:"reasons,omitempty"`
	Error   string   `json:"error,omitempty"` // the validator could not give a verdict
}

// Verification is the data of verification_completed and part of a report.
type Verification struct {
	Passed          bool            `json:"passed"`
	Commands        []CommandResult `json:"commands,omitempty"`
	Review          *ReviewResult   `json:"review,omitempty"`
	ScopeViolations []string        `json:"scope_violations,omitempty"`
}

// RuntimeErrorClassifiedData is the controller's classification of a failure.
type RuntimeErrorClassifiedData struct {
	ErrorInfo
}

// RuntimeRecoveryScheduledData is the policy's decision to try a failed task
// again: attempt N on Runtime, not before DueAt.
type RuntimeRecoveryScheduledData struct {
	Strategy drovertype.Strategy `json:"strategy"`
	N        int                 `json:"n"`
	Runtime  string              `json:"runtime"`
	Model    string              `json:"model,omitempty"`
	DelayMS  int64               `json:"delay_ms"`
	DueAt    time.Time           `json:"due_at"`
	Reason   string              `json:"reason"`
}

// Cancel scopes.
const (
	CancelFlow    = "flow"
	CancelTask    = "task"
	CancelAttempt = "attempt"
)

// CancelRequestedData is an operator's request to stop a flow, a task or an
// attempt (Event.Task and Event.Attempt say which).
type CancelRequestedData struct {
	Scope  string `json:"scope"`
	Reason string `json:"reason,omitempty"`
}

// TaskCancelledData is the controller's decision that a task ends cancelled.
type TaskCancelledData struct {
	Reason string `json:"reason"`
}

// OperatorData is the payload of flow_paused, flow_resumed and
// task_retry_requested.
type OperatorData struct {
	Reason string `json:"reason,omitempty"`
}

// IntegrationScheduledData is the controller's decision to build the flow's
// integration branch from its succeeded tasks, merged in Merge's order.
type IntegrationScheduledData struct {
	N       int    `json:"n"`
	Branch  string `json:"branch"`
	Runtime string `json:"runtime"` // whose workers build it
	Pool    string `json:"pool"`
	// Base is what the build starts from: "" for the flow's base; a
	// published flow's later builds start from, and push to, its pull
	// request's branch (Branch then names it).
	Base string `json:"base,omitempty"`
	// Merge lists the tasks to merge; empty means every task of the flow
	// that has succeeded, in the flow's order (what the controller writes).
	Merge []DepResult `json:"merge,omitempty"`
}

// FlowIntegratedData is a worker's result of building the integration branch.
type FlowIntegratedData struct {
	N      int        `json:"n"`
	Branch string     `json:"branch"`
	Commit string     `json:"commit,omitempty"`
	Error  *ErrorInfo `json:"error,omitempty"`
}

// TaskFailedData is the controller's decision that a task will not be retried.
type TaskFailedData struct {
	Reason string                `json:"reason"`
	Class  drovertype.ErrorClass `json:"class,omitempty"`
}

// Cooldown scopes: what a cooldown holds back.
const (
	CooldownRuntime    = "runtime"    // every attempt on the runtime
	CooldownModel      = "model"      // every attempt asking for the model by name, on any runtime
	CooldownCredential = "credential" // every attempt on a runtime known to use the credential
)

// CooldownKey names a cooldown: its scope and what it holds back.
func CooldownKey(scope, name string) string { return scope + ":" + name }

// Where a cooldown's length came from.
const (
	CooldownResetAt    = "reset_at"    // the quota's reset time the CLI printed
	CooldownRetryAfter = "retry_after" // the wait the CLI asked for
	CooldownDefault    = "default"     // neither: the configured default
)

// CooldownStartedData is the controller's decision that a limit holds back
// every attempt in its scope until Until. Event.Attempt is the attempt that
// met the limit. A cooldown that exists already is extended: Until moves
// later, and Step grows when the limit met its probe (backoff).
type CooldownStartedData struct {
	Scope string `json:"scope"`
	// Name is the runtime, the model, or the credential's fingerprint.
	Name string `json:"name"`
	// Runtimes are, for a credential, the runtimes known to use it.
	Runtimes []string `json:"runtimes,omitempty"`
	// Runtime is where the limit was met.
	Runtime string `json:"runtime"`
	// Step is 1 for a new cooldown, one more for each limit its probe met.
	Step int `json:"step"`
	// From is when the attempt that met the limit ended; Until when the
	// cooldown ends, From plus the wait of Source and Step.
	From   time.Time             `json:"from"`
	Until  time.Time             `json:"until"`
	Source string                `json:"source"`
	Class  drovertype.ErrorClass `json:"class"`
	Cause  string                `json:"cause"`
	// InFlight counts the other attempts running in the scope when the
	// cooldown was decided: they finish, and may meet the limit too.
	InFlight int `json:"in_flight,omitempty"`
}

// CooldownReleasedData is the controller's decision that a cooldown is
// over: its probe, Event.Attempt, got past the limit.
type CooldownReleasedData struct {
	Scope  string `json:"scope"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// AttemptWithdrawnData says why the controller took back a queued attempt
// before any worker ran it (its claim is revoked): the task runs again
// without it counting against its attempts.
type AttemptWithdrawnData struct {
	Reason string `json:"reason"`
	// Cooldown is the cooldown (CooldownKey) it was withdrawn for, if any.
	Cooldown string `json:"cooldown,omitempty"`
}

// TaskWaitingData says why a task that could start its attempt N does not:
// the cooldowns in its way; none says the wait is over. Seq numbers a
// task's waits, so that a wait recorded again after other ones is a new
// event.
type TaskWaitingData struct {
	N         int       `json:"n"`
	Seq       int       `json:"seq"`
	Cooldowns []string  `json:"cooldowns"`
	Until     time.Time `json:"until,omitzero"` // when the longest of them ends; zero while one awaits its probe
	Reason    string    `json:"reason"`
}

// BudgetSetData is an operator's change of a budget, the flow's or
// (Event.Task) a task's: the fields given replace the budget's, 0 meaning
// no limit.
type BudgetSetData struct {
	Tokens  *int64   `json:"tokens,omitempty"`
	CostUSD *float64 `json:"cost_usd,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// PlacementKey names a pool's runtime in the projection's placements.
func PlacementKey(pool, runtime string) string { return pool + "/" + runtime }

// PlacementChangedData is the controller's finding about a runtime in a
// pool, as the worker registry told it: Serving live workers take its
// jobs, and when none does, Reason says why ("no live worker serves
// claude-code in pool default: 2 workers: claude not in PATH"). Event.Attempt
// is an attempt queued for it. Seq numbers a pool's runtime's findings,
// so that the same finding made twice counts once and one made out of turn
// is ignored.
type PlacementChangedData struct {
	Pool    string `json:"pool"`
	Runtime string `json:"runtime"`
	Seq     int    `json:"seq"`
	// Live counts the live workers in the pool, Serving those that take
	// the runtime's jobs.
	Live    int    `json:"live"`
	Serving int    `json:"serving"`
	Reason  string `json:"reason,omitempty"`
}

// AttemptUnplacedData says why the controller took back a queued attempt
// that no live worker could take for its placement timeout: it fails with
// NO_WORKER, and the retry policy moves its task on.
type AttemptUnplacedData struct {
	Reason string `json:"reason"`
	// UnservedMS is how long no live worker served its runtime in its pool
	// while it was queued; TimeoutMS its task's placement timeout.
	UnservedMS int64 `json:"unserved_ms"`
	TimeoutMS  int64 `json:"timeout_ms"`
}
