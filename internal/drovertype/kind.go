package drovertype

// JobKind says what a queued job asks a worker to do.
type JobKind string

// The job kinds.
const (
	// JobAttempt runs a task's CLI (the empty string on the wire).
	JobAttempt JobKind = ""
	// JobIntegrate builds a flow's integration branch from its results; no
	// CLI runs.
	JobIntegrate JobKind = "integrate"
)
