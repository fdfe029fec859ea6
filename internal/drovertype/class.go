package drovertype

import (
	"fmt"
	"slices"
)

// ErrorClass is what kind of failure ended an attempt. It is a wire value:
// events and retry policies carry it, and flows name it in retry_on.
type ErrorClass string

// The error classes: those of a runtime's failures, then those Drover's own
// phases, the checks after the run, the operator and the fleet produce.
const (
	ClassCrashed          ErrorClass = "RUNTIME_CRASHED"
	ClassTimeout          ErrorClass = "RUNTIME_TIMEOUT"
	ClassConnectionFailed ErrorClass = "RUNTIME_CONNECTION_FAILED"
	ClassOutputMalformed  ErrorClass = "RUNTIME_OUTPUT_MALFORMED"
	ClassRuntimeError     ErrorClass = "RUNTIME_ERROR" // the CLI exited 1-127
	ClassRateLimited      ErrorClass = "RATE_LIMITED"
	ClassAuthFailed       ErrorClass = "AUTH_FAILED"
	ClassPrepareFailed    ErrorClass = "PREPARE_FAILED"
	// The repository or the base revision does not exist: nothing will
	// change by running again, so the built-in policy does not retry them
	// (PREPARE_FAILED, a failure that may pass, is retried).
	ClassRepoNotFound  ErrorClass = "REPO_NOT_FOUND"
	ClassBaseNotFound  ErrorClass = "BASE_NOT_FOUND"
	ClassMergeConflict ErrorClass = "MERGE_CONFLICT"
	ClassObserveFailed ErrorClass = "OBSERVE_FAILED"
	// The checks after the run, and the operator.
	ClassVerificationFailed ErrorClass = "VERIFICATION_FAILED"
	ClassScopeViolation     ErrorClass = "SCOPE_VIOLATION"
	ClassCancelled          ErrorClass = "CANCELLED"
	// The worker holding the attempt stopped renewing its claim.
	ClassWorkerLost ErrorClass = "WORKER_LOST"
	// An attempt that failed without saying why (a report with no error).
	ClassUnknown ErrorClass = "UNKNOWN"
	// The native runtime's budgets: each bound of an attempt ends it with
	// its own class, so a policy can tell a task that needs more turns from
	// one that ran out of tokens or time. Not retried by default: the same
	// attempt would end the same way.
	ClassTurnBudgetExhausted  ErrorClass = "TURN_BUDGET_EXHAUSTED"
	ClassTokenBudgetExhausted ErrorClass = "TOKEN_BUDGET_EXHAUSTED"
	ClassTimeBudgetExhausted  ErrorClass = "TIME_BUDGET_EXHAUSTED"
	// The flow's or the task's budget was spent: the controller ends the
	// task without running it again (docs/flows.md#budgets). A quota of the
	// provider is not this: it is RATE_LIMITED with a reset time.
	ClassBudgetExceeded ErrorClass = "BUDGET_EXCEEDED"
	// The CLI was stuck on what its sandbox refuses it (a TCP port, a
	// path), refused again and again with nothing else done: Drover
	// stopped it, or it failed so. Not retried on the same runtime, whose
	// sandbox refuses the same again; the fallback runtime may run.
	ClassSandboxDenied ErrorClass = "SANDBOX_DENIED"
	// No live worker served the attempt's runtime in its pool for the
	// task's placement timeout: the controller takes the queued attempt
	// back and the retry policy moves the task to its next runtime
	// (docs/design.md#placement). It never ran, so it uses no attempt.
	ClassNoWorker ErrorClass = "NO_WORKER"
	// The forge refused to open or update a flow's pull request as asked
	// (a base branch, a label or a user it does not know): publishing
	// ends; the flow's own outcome stands (docs/forges.md).
	ClassPublishRefused ErrorClass = "PUBLISH_REFUSED"
)

// classes lists every class, in the order above.
var classes = []ErrorClass{
	ClassCrashed, ClassTimeout, ClassConnectionFailed, ClassOutputMalformed,
	ClassRuntimeError, ClassRateLimited, ClassAuthFailed, ClassPrepareFailed,
	ClassRepoNotFound, ClassBaseNotFound, ClassMergeConflict, ClassObserveFailed, ClassVerificationFailed,
	ClassScopeViolation, ClassCancelled, ClassWorkerLost, ClassUnknown,
	ClassTurnBudgetExhausted, ClassTokenBudgetExhausted, ClassTimeBudgetExhausted,
	ClassBudgetExceeded, ClassSandboxDenied, ClassNoWorker, ClassPublishRefused,
}

// Classes returns every error class, in declaration order.
func Classes() []ErrorClass { return slices.Clone(classes) }

// Known reports whether c is one of the classes above.
func (c ErrorClass) Known() bool { return slices.Contains(classes, c) }

// ParseErrorClass returns the class named s, or an error naming the known
// ones.
func ParseErrorClass(s string) (ErrorClass, error) {
	if c := ErrorClass(s); c.Known() {
		return c, nil
	}
	return "", fmt.Errorf("unknown error class %q (known: %v)", s, classes)
}

// Category says where a failure came from, for people and for tracing.
type Category string

// The categories of a failure.
const (
	CategoryRuntime        Category = "runtime"        // the CLI or its model
	CategoryInfrastructure Category = "infrastructure" // the worker, git, NATS: may work elsewhere or later
	CategoryInput          Category = "input"          // the task itself: the repo, the base, the merges
)
