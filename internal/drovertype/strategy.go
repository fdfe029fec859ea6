package drovertype

// Strategy is how a failed task is tried again (runtime_recovery_scheduled).
type Strategy string

// The recovery strategies.
const (
	// StrategySameRuntime retries on the runtime that failed, after a delay.
	StrategySameRuntime Strategy = "same_runtime_retry"
	// StrategyFallback moves to the next runtime of the fallback chain at once.
	StrategyFallback Strategy = "fallback_runtime"
)
