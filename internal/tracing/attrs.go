package tracing

import "go.opentelemetry.io/otel/attribute"

// Span attribute keys of Drover's own. Span attributes may carry ids (they
// are what an operator searches a trace by); metric labels never do.
const (
	KeyFlow      = attribute.Key("drover.flow.id")
	KeyFlowName  = attribute.Key("drover.flow.name")
	KeyTask      = attribute.Key("drover.task.id")
	KeyAttempt   = attribute.Key("drover.attempt.id")
	KeyAttemptN  = attribute.Key("drover.attempt.n")
	KeyRuntime   = attribute.Key("drover.runtime")
	KeyModel     = attribute.Key("drover.model")
	KeyPool      = attribute.Key("drover.pool")
	KeyWorker    = attribute.Key("drover.worker.id")
	KeyEpoch     = attribute.Key("drover.claim.epoch")
	KeyClaim     = attribute.Key("drover.claim.result")
	KeyState     = attribute.Key("drover.state")
	KeyRound     = attribute.Key("drover.round")
	KeyBranch    = attribute.Key("drover.branch")
	KeyCommit    = attribute.Key("drover.commit")
	KeyEventType = attribute.Key("drover.event.type")
	KeyEventSeq  = attribute.Key("drover.event.seq")
	KeyDuplicate = attribute.Key("drover.event.duplicate")
	KeyDelivery  = attribute.Key("drover.job.delivery")
	KeyJobKind   = attribute.Key("drover.job.kind")
	KeyExitCode  = attribute.Key("drover.exit_code")
	KeyOutcome   = attribute.Key("drover.outcome")

	KeyController  = attribute.Key("drover.controller.id")
	KeyLeaderEpoch = attribute.Key("drover.leader.epoch")

	KeyErrorClass    = attribute.Key("drover.error.class")
	KeyErrorMessage  = attribute.Key("drover.error.message")
	KeyErrorCategory = attribute.Key("drover.error.category")
)
