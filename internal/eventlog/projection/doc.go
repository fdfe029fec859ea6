// Package projection is the pure fold of the EVENTS stream into flow, task
// and attempt records: State.Apply takes the state and one event (and the
// subject it came on) and changes the state, with no clock, no I/O and no
// randomness, so that folding the same stream always gives the same records
// and a restarted controller, or `controller rebuild`, agrees with the live
// one. Each event type's payload, fold function, envelope and id rule are
// one entry of the handlers table.
//
// The fold decides nothing: it records what events say. Everything on the
// stream is outside input (anyone who may publish on drover.events.* can
// write there), so each event is judged before it is applied, and falls in
// one of three kinds:
//
//   - Folded: it is what a writer publishes at that point.
//   - Ignored (stale): at-least-once delivery and fencing make it normal,
//     though it changes nothing: a duplicate id; an event of a superseded
//     claim (an epoch below the attempt's, counted in Attempt.Fenced); a
//     controller decision of an older leader epoch than the latest
//     leader_elected (counted in Leadership.Fenced, and its id not seen:
//     the leader of the day may make the same decision; leadership.go); an
//     event about an attempt, task or flow that has ended; a decision made
//     from an older state that has moved on since (a task cancelled,
//     retried by an operator, already scheduled; a flow reopened into a new
//     round). Its id is seen, so it is ignored once more if it comes again.
//   - Poison: no writer could have written it, whatever the order and the
//     redeliveries. Malformed (ErrMalformed): it disagrees with itself
//     whatever the state — not on its own subject (drover.events.<flow>.
//     <type>), an invalid flow, task or attempt id, an attempt id of
//     another flow or task, an event id that is not TYPE:KEY of its own
//     type and the key its writer derives, a task, attempt or epoch its type
//     never carries (or missing), a type the fold does not know, a payload
//     naming another attempt, branch or build, a flow_submitted whose spec
//     does not validate as the submit API validates it, a worker's event
//     with a leader epoch, an election on a flow's subject. A contradiction
//     (ErrContradiction): well formed, but impossible after what the
//     projection holds — about a flow, task or attempt that was never
//     recorded (a claim of an attempt nobody scheduled), from a claim's
//     epoch above the one folded (a worker publishes its claim before
//     anything else of it), an attempt number beyond the next, a decision
//     about an attempt that has not failed, a flow completed while a task
//     of its round is not terminal (or succeeded without its integration,
//     cancelled without a cancel), a report of a branch not the attempt's
//     own, a decision of a leader epoch no election has opened, an
//     election that skips an epoch. And an undecodable message
//     (event.ErrDecode).
//
// The rule that separates the last two: an event is stale when some order
// of what honest writers publish, under redelivery and fencing, puts it
// there; poison when none does. Within a flow's round what has ended stays
// ended, epochs only grow, a worker's events of one claim are in order and
// begin with its claim, and the controller decides only on what it has
// folded: so an end nothing led to, a claim ahead of its scheduling or an
// event ahead of its claim is no reordering but a forgery or a bug.
//
// A poison event is recorded at its sequence with its reason and size,
// and changes nothing else, not even the ids seen: a forged event cannot
// take the id of the real one it imitates. Only the last MaxPoisons records
// are kept, with the count of all (State.PoisonCount), so junk cannot grow
// the projection; the records evicted are removed in the same batch.
//
// Decisions belong to package controller, persistence to package store,
// the wire format to package event.
//
// Its datadriven tests (testdata/fold) fold test streams through a real
// store; package foldtest holds what they and the store's tests share.
package projection
