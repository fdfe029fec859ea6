// Package worker is the stateless worker daemon: it claims attempt jobs for
// its pool and runtimes when a slot is free, holds them with heartbeats and
// a fenced claim, runs them through package attempt, publishes their events,
// and acks a job only after its report is stored.
//
// It must not read the controller's projection: a job carries all it needs.
package worker
