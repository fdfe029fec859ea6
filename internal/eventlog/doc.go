// Package eventlog owns Drover's event types, their wire encoding, and the
// projection: a pure fold of the EVENTS stream into flow, task and attempt
// records, persisted in Pebble together with the last applied stream sequence.
//
// It must not know about NATS, git or runtimes: the controller feeds it raw
// messages with their stream sequence, and reads the state it folded.
package eventlog
