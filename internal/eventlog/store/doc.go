// Package store keeps the projection (package projection) in Pebble: the
// records a fold changed and the stream sequence it reached, written in one
// batch, so that after a crash the store is the fold of a prefix of the
// EVENTS stream and the controller refolds from the next sequence. It also
// compares two stores record by record, for `controller rebuild`.
//
// It must not know what the records mean (the fold it calls does), nor
// anything of NATS: the controller hands it messages with their sequence.
package store
