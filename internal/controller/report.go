package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/queue"
)

// SubjectReport is the API subject of an attempt's whole report.
const SubjectReport = queue.APIPrefix + ".report"

// ReportRequest asks for one attempt's report.
type ReportRequest struct {
	Attempt string `json:"attempt"`
}

// ReportResponse is an attempt's report as its worker sent it, stdout tail
// included (the projection keeps the report without it), read from the
// report event at Seq on the EVENTS stream.
type ReportResponse struct {
	Attempt string        `json:"attempt"`
	Event   string        `json:"event"`
	Seq     uint64        `json:"seq"`
	Report  *event.Report `json:"report"`
}

func (c *Controller) handleReport(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err != nil {
		c.refuse(r, "report", err)
		return
	}
	req, err := decodeReport(body)
	if err != nil {
		c.refuse(r, "report", err)
		return
	}
	var found bool
	var id string
	var seq uint64
	c.store.Read(func(st *projection.State) {
		if a := st.Attempts[req.Attempt]; a != nil {
			found, id = true, a.ReportEventID
			seq = st.Seen[id]
		}
	})
	switch {
	case !found:
		_ = r.Error(CodeNotFound, "no attempt "+req.Attempt, nil)
		return
	case id == "":
		_ = r.Error(CodeNotFound, "attempt "+req.Attempt+" has not reported", nil)
		return
	}
	rep, err := c.reportAt(ctx, seq, id)
	if err != nil {
		code := CodeInternal
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			code = CodeNotFound
		}
		_ = r.Error(code, fmt.Sprintf("report of %s: %v", req.Attempt, err), nil)
		return
	}
	c.respondJSON(ctx, r, ReportResponse{Attempt: req.Attempt, Event: id, Seq: seq, Report: rep})
}

// reportAt reads the report event id from the EVENTS stream at seq.
func (c *Controller) reportAt(ctx context.Context, seq uint64, id string) (*event.Report, error) {
	s, err := c.js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return nil, err
	}
	msg, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("event %s at sequence %d: %w", id, seq, err)
	}
	ev, err := event.Decode(msg.Data)
	if err != nil {
		return nil, fmt.Errorf("event at sequence %d: %w", seq, err)
	}
	if ev.ID != id || ev.Type != event.AttemptReported {
		return nil, fmt.Errorf("sequence %d holds %s %s, not the report %s", seq, ev.Type, ev.ID, id)
	}
	var rep event.Report
	if err := ev.Payload(&rep); err != nil {
		return nil, fmt.Errorf("event %s: %w", id, err)
	}
	return &rep, nil
}

// Report asks for an attempt's whole report, stdout tail included.
func (cl *Client) Report(ctx context.Context, attempt string) (*ReportResponse, error) {
	if err := (ReportRequest{Attempt: attempt}).check(); err != nil {
		return nil, refusedHere(err)
	}
	var resp ReportResponse
	err := cl.call(ctx, cl.read(SubjectReport), ReportRequest{Attempt: attempt}, &resp)
	return &resp, err
}
