// Package projection is the pure fold of the EVENTS stream into flow, task
// and attempt records: State.Apply takes the state and one event and
// changes the state, with no clock, no I/O and no randomness, so that
// folding the same stream always gives the same records and a restarted
// controller, or `controller rebuild`, agrees with the live one. Each event
// type's payload and fold function are one entry of the handlers table.
//
// The fold decides nothing: it records what events say, ignoring what
// at-least-once delivery and fencing make stale, and records as poison what
// cannot be folded. Decisions belong to package controller, persistence to
// package store, the wire format to package event.
//
// Its datadriven tests (testdata/fold) fold test streams through a real
// store; package foldtest holds what they and the store's tests share.
package projection
