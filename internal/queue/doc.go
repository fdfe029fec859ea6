// Package queue owns Drover's JetStream layout and the guarantees it moves
// bytes with: the streams, buckets and subjects (Ensure, and the checks the
// daemons wait on at start: CheckJetStream, CheckBuckets), publishing events
// and jobs with their ids as Nats-Msg-Id so a republish counts once (and a
// decision whose id another writer took first is stored under another),
// batches of publishes acknowledged together, the attempt job and its
// checks off the wire, the attempt consumers, the claim lease with its
// fencing epoch, and dead letters.
//
// The worker and the controller hold it through small role interfaces
// (roles.go), as jetstream's users hold jetstream's: a Claimer claims
// attempts, a ClaimRevoker takes them back and follows the claims, a
// CancelWatcher hands a worker the stop signals.
//
// It carries events as package event's envelopes without knowing what they
// mean (that is package projection), and jobs without knowing how attempts
// run (that is package worker). Connecting to NATS is package natsconn;
// the worker registry is package fleet; object stores are package objstore.
package queue
