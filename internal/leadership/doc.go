// Package leadership is who leads Drover's controllers: a lease in the
// drover-leader bucket, won by creating its one key, held by writing it
// again on its last revision well inside its TTL (each write carries the
// TTL: a lease nobody renews is removed by the server), handed over by
// deleting it; and each term's deadline on this process's monotonic clock,
// measured from when the winning or renewing write was sent, past which
// the holder stops acting whatever the server says, before its lease can
// lapse there. An Elector campaigns on a timer and on the bucket's changes
// (a resignation, a lapse), runs the leader's work for each term it wins
// and resigns when it stops.
//
// The lease decides who may try to lead; it fences nothing. Fencing is in
// the event log, by the epoch each term appends and every decision carries
// (package controller, package projection): a lease cannot stop a paused
// holder's late writes, the log can. So this package must not know what a
// leader does, nor events, epochs or the projection.
package leadership
