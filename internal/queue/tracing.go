package queue

import (
	"context"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/tracing"
)

// Subjects with their variable tokens named: messaging spans are named by
// these (span names must not carry ids), and carry the real subject as an
// attribute.
const (
	EventsTemplate   = eventsPrefix + "{flow}.{type}"
	AttemptsTemplate = attemptsPrefix + "{pool}.{runtime}"
)

// EventOwner is the span an event belongs to when its publisher has none in
// its context: the attempt's, else the task's, else the flow's. An
// integration build's id names no attempt span: its events belong to the
// flow.
func EventOwner(ev *event.Event) tracing.Owner {
	o := tracing.Owner{Flow: ev.Flow, Task: ev.Task, Attempt: ev.Attempt}
	if strings.Contains(o.Attempt, "__") {
		o.Attempt = ""
	}
	return o
}

// JobOwner is the span a job belongs to: its attempt's, or its flow's for an
// integration build.
func JobOwner(j *Job) tracing.Owner {
	if j.Kind == drovertype.JobIntegrate {
		return tracing.Owner{Flow: j.Flow}
	}
	return tracing.Owner{Flow: j.Flow, Task: j.Task, Attempt: j.Attempt}
}

// ParseEventSubject splits an event's subject into its flow and type.
func ParseEventSubject(subject string) (flowID, typ string) {
	rest, ok := strings.CutPrefix(subject, eventsPrefix)
	if !ok {
		return "", ""
	}
	flowID, typ, _ = strings.Cut(rest, ".")
	return flowID, typ
}

// EventDestination names the messaging spans of an event: its subject
// with the flow id left out (event types are few, flows many).
func EventDestination(typ string) string { return eventsPrefix + "{flow}." + typ }

// tracePublish starts the producer span of msg and puts its context in the
// headers; the returned func ends it with the server's answer. describe is
// called only when tracing is on: off, this does nothing and allocates
// nothing (BenchmarkTracePublish).
func tracePublish(ctx context.Context, msg *nats.Msg, describe func() (tracing.Message, tracing.Owner)) (context.Context, func(*jetstream.PubAck, error)) {
	if !tracing.Enabled() {
		return ctx, noEnd
	}
	m, owner := describe()
	m.Subject, m.BodySize = msg.Subject, len(msg.Data)
	ctx, span := tracing.StartPublish(ctx, msg, m, owner)
	return ctx, func(ack *jetstream.PubAck, err error) {
		if ack != nil && ack.Duplicate {
			// Inside the dedup window: the server kept the first copy, and
			// nobody processes this one.
			span.SetAttributes(tracing.KeyDuplicate.Bool(true))
		}
		tracing.End(span, err)
	}
}

func noEnd(*jetstream.PubAck, error) {}
