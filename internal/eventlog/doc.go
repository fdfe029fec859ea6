// Package eventlog is Drover's log of truth, in three parts below it: the
// wire schema of the EVENTS stream (package event), the pure fold of those
// events into flow, task and attempt records (package projection), and the
// Pebble store that keeps the folded records with the stream sequence they
// reached (package store). It holds no code of its own: each part imports
// only the ones before it, so the schema never learns what the fold does
// with it, and the fold never learns how it is stored.
package eventlog
