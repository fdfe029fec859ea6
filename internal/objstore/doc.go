// Package objstore keeps blobs in JetStream's object stores: an attempt's
// artifacts (its full masked log, its patch, its parsed events), and the
// bodies of API messages too large for one NATS message (transfers).
//
// It must not know what the blobs hold.
package objstore
