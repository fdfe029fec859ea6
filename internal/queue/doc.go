// Package queue owns Drover's use of NATS JetStream: the streams, subjects,
// consumers and buckets, publishing with dedup ids, the attempt job and its
// claim lease, and the embedded nats-server.
//
// It must not know what events mean (that is eventlog) nor how attempts run
// (that is the worker): it moves bytes with the guarantees the contracts need.
package queue
