package controller

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// TestPublishEvent: what `controller publish` records, or refuses, and
// what --dry-run answers without recording anything.
func TestPublishEvent(t *testing.T) {
	c := &Controller{cfg: &config.Config{}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	st := projection.NewState()
	pub := &flow.Publish{PullRequest: &flow.PullRequestSpec{Forge: "gh", Repo: "acme/app", Title: "Add a", On: flow.PublishOnSuccess}}
	st.Flows["bare"] = &projection.Flow{ID: "bare", State: drovertype.FlowSucceeded}
	st.Flows["busy"] = &projection.Flow{ID: "busy", State: drovertype.FlowRunning, Publish: pub}
	st.Flows["done"] = &projection.Flow{ID: "done", State: drovertype.FlowSucceeded, Publish: pub,
		Integration: &projection.Integration{N: 1, State: drovertype.IntegrationSucceeded, Branch: "drover/done/integration"}}
	st.Flows["wait"] = &projection.Flow{ID: "wait", State: drovertype.FlowSucceeded, Publish: pub,
		PR: &projection.PullRequest{Requests: 1, Pending: &event.PullRequestRequestedData{N: 1}}}
	for id, want := range map[string]string{
		"bare": "has no publish section", "busy": "is running: it is published when it ends", "wait": "request 1 waits for the forge",
	} {
		if _, _, err := c.publishEvent(st, Target{Flow: id}, PublishRequest{Target: id}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", id, err, want)
		}
	}
	if _, _, err := c.publishEvent(st, Target{Flow: "nosuch"}, PublishRequest{}); err == nil {
		t.Error("a flow that does not exist")
	}
	ev, resp, err := c.publishEvent(st, Target{Flow: "done"}, PublishRequest{Target: "done", DryRun: true})
	if err != nil || ev != nil || resp.Title != "Add a" || !strings.Contains(resp.Body, "Drover flow `done`") || !strings.HasPrefix(resp.Message, "dry run: opening") {
		t.Fatalf("dry run: %v %+v %v", ev, resp, err)
	}
	ev, _, err = c.publishEvent(st, Target{Flow: "done"}, PublishRequest{Target: "done", Reason: "now"})
	if err != nil || ev == nil || !strings.HasPrefix(ev.ID, "pull_request_requested:done:op-") {
		t.Fatalf("publish: %v %v", ev, err)
	}
	if err := st.Apply(1, ev); err != nil {
		t.Fatalf("what publish records folds: %v", err)
	}
	if pr := st.Flows["done"].PR; pr == nil || pr.Pending == nil || pr.Pending.Reason != "now" || pr.Pending.Head != "drover/done/integration" {
		t.Fatalf("folded: %+v", pr)
	}
}
