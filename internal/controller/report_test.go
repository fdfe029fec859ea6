package controller

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// TestReportReadsTheWholeReport: the state keeps a report without its
// stdout tail; the report API reads it whole from the report event, and
// says clearly when there is none.
func TestReportReadsTheWholeReport(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	cl := &Client{NC: h.nc}
	id, att := h.submitOne()
	h.waitFor("the attempt", func(st *projection.State) bool { return st.Attempts[att] != nil })

	wantCode := func(what string, err error, code string) {
		t.Helper()
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != code {
			t.Errorf("%s: err = %v, want code %s", what, err, code)
		}
	}
	_, err := cl.Report(ctx, att)
	wantCode("before the report", err, CodeNotFound)
	_, err = cl.Report(ctx, id+"_b_1")
	wantCode("an unknown attempt", err, CodeNotFound)
	_, err = cl.Report(ctx, "a.>")
	wantCode("not an attempt id", err, CodeBadRequest)

	h.publish(event.AttemptClaimed, id, "a", att, 1, event.AttemptClaimedData{Worker: "w1"})
	sent := event.Report{Success: true, Branch: drovertype.AttemptBranch(id, "a", 1), Commit: "abc",
		StdoutTail: "{\"type\":\"result\",\"result\":\"done\"}\n", StderrTail: "warning: x\n"}
	h.publish(event.AttemptReported, id, "a", att, 1, sent)
	h.waitFor("the report", func(st *projection.State) bool { return st.Attempts[att].Report != nil })

	st, err := cl.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	kept := st.Detail.Attempts[0]
	if kept.Report.StdoutTail != "" || kept.Report.StderrTail != sent.StderrTail || kept.ReportEventID != drovertype.ClaimEventID(event.AttemptReported, att, 1) {
		t.Errorf("status: report %+v, event %q; want no stdout tail, the stderr tail, event report-a", kept.Report, kept.ReportEventID)
	}
	resp, err := cl.Report(ctx, att)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempt != att || resp.Event != drovertype.ClaimEventID(event.AttemptReported, att, 1) || resp.Seq == 0 ||
		resp.Report.StdoutTail != sent.StdoutTail || resp.Report.StderrTail != sent.StderrTail || resp.Report.Commit != "abc" {
		t.Errorf("report = %+v %+v, want what the worker sent", resp, resp.Report)
	}
}
