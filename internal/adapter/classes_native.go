package adapter

// Error classes of the native runtime's budgets (internal/native): each
// bound of an attempt ends it with its own class, so a policy can tell a
// task that needs more turns from one that ran out of money or time. They
// are not retried by default: the same attempt would end the same way.
const (
	ClassTurnBudgetExhausted  = "TURN_BUDGET_EXHAUSTED"
	ClassTokenBudgetExhausted = "TOKEN_BUDGET_EXHAUSTED"
	ClassTimeBudgetExhausted  = "TIME_BUDGET_EXHAUSTED"
)
