package controller

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// TestRoundTasksByFile: split: file gives each file the comments name a
// task of its own with only its comments, and the rest (the review's
// body, a comment on no file, the checks) one more; ids the flow has are
// not taken.
func TestRoundTasksByFile(t *testing.T) {
	st := projection.NewState()
	f := &projection.Flow{ID: "f", Publish: &flow.Publish{PullRequest: &flow.PullRequestSpec{},
		Iterate: &flow.IterateSpec{Split: flow.SplitFile}}, PR: &projection.PullRequest{Number: 3}}
	st.Flows["f"] = f
	st.Tasks[projection.TaskKey("f", "round-1-1")] = &projection.Task{Flow: "f", ID: "round-1-1", State: drovertype.TaskSucceeded}
	take := []*event.PullRequestFeedbackData{
		{Kind: event.FeedbackChangesRequested, Key: "review-1", Review: &event.ReviewFeedback{ID: "1", Author: "dave", Body: "overall: tidy up",
			Comments: []event.ReviewComment{{Path: "b.go", Line: 2, Body: "in b"}, {Path: "a.go", Line: 1, Body: "in a"}, {Body: "in general"}}}},
		{Kind: event.FeedbackChecksFailed, Key: "check-x-1", Check: &event.CheckFeedback{Name: "test", Conclusion: "failure"}},
	}
	tasks := roundTasks(st, f, 1, take)
	if len(tasks) != 3 {
		t.Fatalf("%d tasks: %+v", len(tasks), tasks)
	}
	a, b, rest := tasks[0], tasks[1], tasks[2]
	switch {
	case a.ID != "round-1-1-2" || len(a.Files) != 1 || a.Files[0] != "a.go" || !strings.Contains(a.Prompt, "> in a") || strings.Contains(a.Prompt, "in b") ||
		strings.Contains(a.Prompt, "Check test"):
		t.Fatalf("a.go's task: %+v", a)
	case b.ID != "round-1-2" || b.Files[0] != "b.go" || !strings.Contains(b.Prompt, "> in b"):
		t.Fatalf("b.go's task: %+v", b)
	case rest.ID != "round-1" || !strings.Contains(rest.Prompt, "> overall: tidy up") || !strings.Contains(rest.Prompt, "> in general") ||
		!strings.Contains(rest.Prompt, "Check test: failure") || strings.Contains(rest.Prompt, "in a"):
		t.Fatalf("the rest: %+v", rest)
	}
	f.Publish.Iterate.Split = flow.SplitRound
	if one := roundTasks(st, f, 1, take); len(one) != 1 || !strings.Contains(one[0].Prompt, "> in a") || !strings.Contains(one[0].Prompt, "> in b") {
		t.Fatalf("split: round: %+v", one)
	}
}
