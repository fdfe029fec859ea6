package console

import (
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

func TestPRCell(t *testing.T) {
	pub := &flow.Publish{PullRequest: &flow.PullRequestSpec{Forge: "gh"}}
	for _, tc := range []struct {
		f    *projection.Flow
		want string
	}{
		{&projection.Flow{}, "—"},
		{&projection.Flow{Publish: pub}, "when the flow ends, on gh"},
		{&projection.Flow{Publish: pub, PR: &projection.PullRequest{Pending: &event.PullRequestRequestedData{N: 1}}}, "publishing"},
		{&projection.Flow{Publish: pub, PR: &projection.PullRequest{Error: &event.ErrorInfo{Class: "AUTH_FAILED"}}}, "not published: AUTH_FAILED"},
		{&projection.Flow{Publish: pub, PR: &projection.PullRequest{Number: 7, State: "open", URL: "https://x/7",
			Checks: &event.CheckSummary{Passed: 2, Failed: 1}, Rounds: []*projection.ReviewRound{{N: 1, State: "running"}},
			Feedback: []*event.PullRequestFeedbackData{{Key: "k"}}}},
			"#7 open · checks 2 passed, 1 failed, 0 pending · round 1 running · 1 feedback waiting"},
	} {
		if got := prCell(tc.f); got.Text != tc.want || got.Href != "" {
			t.Errorf("%+v: %+v; want %q", tc.f.PR, got, tc.want)
		}
	}
}
