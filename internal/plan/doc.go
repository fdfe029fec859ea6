// Package plan owns the wire form of a task's plan: the runtimes, retry
// policy, timeout and scope resolved for it (Resolved), with the level each
// came from. flow_submitted events carry plans and the projection keeps
// them, so their JSON form is part of the wire format: change it only
// compatibly.
//
// It holds data and what reads it (a default for a value a plan recorded
// before it existed lacks), nothing more: resolving a plan and deciding
// with one are internal/policy's, which names these types as its own. The
// event schema imports this package, never policy (internal/codecheck
// checks that), so the wire schema does not depend on the package that
// decides.
package plan
