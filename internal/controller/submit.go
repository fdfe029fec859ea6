package controller

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/policy"
)

// partSize bounds the encoded tasks of one flow_tasks_submitted event: well
// inside an event's limit (event.MaxEventSize, the stream's message
// size), so a flow of any number of tasks is recorded in events that fit.
const partSize = 256 << 10

// flowEvents are the events that record an accepted flow: flow_submitted
// alone when it fits in partSize, else its tasks in flow_tasks_submitted
// parts first and then a flow_submitted that names how many parts there are.
// The fold assembles them; the flow exists only once all are folded.
func flowEvents(id string, at time.Time, data event.FlowSubmittedData) ([]*event.Event, error) {
	whole, err := event.New(drovertype.EventID(event.FlowSubmitted, id), event.FlowSubmitted, at, id, "", "", 0, data)
	if err != nil {
		return nil, err
	}
	if len(whole.Data) <= partSize {
		return []*event.Event{whole}, nil
	}
	var (
		evs  []*event.Event
		part event.FlowTasksSubmittedData
		size int
	)
	flush := func() error {
		part.Part = len(evs) + 1
		ev, err := event.New(drovertype.EventID(event.FlowTasksSubmitted, fmt.Sprintf("%s:%d", id, part.Part)), event.FlowTasksSubmitted,
			at, id, "", "", 0, part)
		if err != nil {
			return err
		}
		if len(ev.Data) > event.MaxEventSize-4096 {
			return fmt.Errorf("task %s encodes to %d bytes, more than one event holds (%d)",
				part.Tasks[0].ID, len(ev.Data), event.MaxEventSize)
		}
		evs = append(evs, ev)
		part, size = event.FlowTasksSubmittedData{}, 0
		return nil
	}
	for _, t := range data.Spec.Tasks {
		tb, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		plan, ok := data.Plan[t.ID]
		pb, _ := json.Marshal(plan)
		n := len(tb) + len(pb) + len(t.ID) + 8
		if size > 0 && size+n > partSize {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		part.Tasks = append(part.Tasks, t)
		if ok {
			if part.Plan == nil {
				part.Plan = map[string]policy.Resolved{}
			}
			part.Plan[t.ID] = plan
		}
		size += n
	}
	if len(part.Tasks) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	head := data
	head.Spec.Tasks, head.Plan, head.Parts = nil, nil, len(evs)
	ev, err := event.New(drovertype.EventID(event.FlowSubmitted, id), event.FlowSubmitted, at, id, "", "", 0, head)
	if err != nil {
		return nil, err
	}
	return append(evs, ev), nil
}
