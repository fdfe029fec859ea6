// Package worker is the stateless worker daemon: it checks its runtimes and
// registers them in the fleet (package fleet), claims attempt jobs for its
// pool and runtimes when a slot is free and the disk has room, holds them
// with heartbeats and a fenced claim (package queue), runs them through
// package attempt, streams their output, stores their artifacts (package
// objstore), publishes their events masked of secrets, stops an attempt the
// controller cancels, and acks a job only after its report is stored. A
// runtime one of its attempts found rate limited it pulls no jobs of for
// the stated wait (pause.go), before the controller's cooldown holds the
// fleet. Stop
// drains: it claims nothing more and lets what runs finish; HandBack gives
// the running attempts back at once.
//
// It must not read the controller's projection nor decide anything: a job
// carries all it needs, and what happens next is the controller's.
package worker
