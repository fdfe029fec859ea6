// Package event is the wire schema of the EVENTS stream: the envelope every
// event has, the event types, and the payload of each, as the controller
// and the workers write them. It decodes and checks an envelope off the
// wire and encodes one for it.
//
// Payloads carry a flow's Spec (package flow) and its resolved plans
// (package plan), so their JSON forms are part of the wire format too.
//
// It must not know what events do to the state (package projection) nor
// how they travel (package queue), nor depend on a package that decides
// (policy, controller: internal/codecheck fails if it does).
package event
