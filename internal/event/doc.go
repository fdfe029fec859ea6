// Package event is the wire schema of the EVENTS stream: the envelope every
// event has, the event types, and the payload of each, as the controller
// and the workers write them. It decodes and checks an envelope off the
// wire and encodes one for it.
//
// It must not know what events do to the state (package projection) nor
// how they travel (package queue).
package event
