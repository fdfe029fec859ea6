package controller

import (
	"fmt"
	"slices"
	"sort"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/policy/feedback"
)

// Publishing a flow and its review rounds are decisions like the others
// (docs/forges.md): once a flow with a publish section has ended, the
// decision asks for its pull request to be opened or updated
// (pull_request_requested, once per round of the flow); once the forge
// has answered and the pull request is open, waiting feedback starts a
// review round (review_round_started), within max_rounds and the flow's
// budget. The forge calls are carried out by the forge runner
// (forgerun.go), which records what the forge answered and what it sees.

// publishing decides for every ended flow with a publish section, in the
// order of their ids.
func (dc *decider) publishing() error {
	var ids []string
	for id, f := range dc.st.Flows {
		if f.Publish != nil && f.Publish.PullRequest != nil && f.State.Terminal() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := dc.st.Flows[id]
		if err := dc.publishRequest(f); err != nil {
			return err
		}
		if err := dc.reviewRound(f); err != nil {
			return err
		}
	}
	return nil
}

// publishRequest asks for the flow's pull request once per round of the
// flow: to open it when the flow succeeded (or, with on: partial, failed
// in part), to update it — with a comment on what a review round did —
// whenever a round ends once it exists.
func (dc *decider) publishRequest(f *projection.Flow) error {
	pr := f.PR
	if pr != nil && pr.Requests > 0 && pr.RequestRound >= f.Round {
		return nil
	}
	if f.State == drovertype.FlowCancelled || !(pr != nil && pr.Number > 0) && !publishable(f) {
		return nil
	}
	d, ok := prRequest(dc.c.cfg, dc.st, f)
	if !ok {
		return nil
	}
	return dc.add(fmt.Sprintf("%s:r%d", f.ID, f.Round), event.PullRequestRequested, f.ID, "", "", d)
}

// prRequest is the next publish request of an ended flow; false when it
// has nothing to publish from (no integration branch built).
func prRequest(cfg *config.Config, st *projection.State, f *projection.Flow) (event.PullRequestRequestedData, bool) {
	spec := f.Publish.PullRequest
	d := event.PullRequestRequestedData{Round: f.Round, Forge: spec.Forge, Repo: spec.Repo, Base: spec.Base,
		Title: prTitle(f), Body: prBody(cfg, st, f), Labels: spec.Labels, Reviewers: spec.Reviewers, Assignees: spec.Assignees,
		N: 1}
	if spec.Draft != nil {
		d.Draft = *spec.Draft
	}
	switch pr := f.PR; {
	case pr != nil && pr.Number > 0:
		d.N, d.Head, d.Base = pr.Requests+1, pr.Head, pr.Base
		if r := pr.Round(); r != nil && r.FlowRound == f.Round && r.State != projection.RoundRunning {
			d.Comment = roundComment(cfg, st, f, r)
		}
	case f.Integration == nil || f.Integration.State != drovertype.IntegrationSucceeded:
		return d, false
	default:
		if pr != nil {
			d.N = pr.Requests + 1
		}
		d.Head = f.Integration.Branch
	}
	return d, true
}

// reviewRound starts a round when feedback waits on an open pull request
// whose latest update the forge has taken, and max_rounds and the budget
// allow it; an operator's `controller iterate` starts one whatever
// max_rounds says.
func (dc *decider) reviewRound(f *projection.Flow) error {
	pr := f.PR
	if pr == nil || pr.Number == 0 || pr.State != string(forge.Open) || pr.Pending != nil || pr.RequestRound != f.Round || f.Cancel != nil {
		return nil
	}
	take, operator := roundFeedback(f)
	if len(take) == 0 {
		return nil
	}
	if it := f.Publish.Iterate; !operator && (it == nil || automaticRounds(pr) >= it.MaxRounds) {
		return nil
	}
	if reached(dc.c.cfg, "the flow's", f.Budget, f.Spend) != "" {
		return nil
	}
	n := len(pr.Rounds) + 1
	d := event.ReviewRoundStartedData{N: n, Base: pr.Head, Tasks: roundTasks(dc.st, f, n, take)}
	for _, fb := range take {
		d.Feedback = append(d.Feedback, fb.Key)
	}
	return dc.add(fmt.Sprintf("%s:%d", f.ID, n), event.ReviewRoundStarted, f.ID, "", "", d)
}

// roundFeedback is the waiting feedback a round takes: an operator's,
// reviews that requested changes, and failed checks of the pull request's
// head (the checks iterate.checks names, if any), as iterate.on says.
func roundFeedback(f *projection.Flow) (take []*event.PullRequestFeedbackData, operator bool) {
	it, pr := f.Publish.Iterate, f.PR
	for _, fb := range pr.Feedback {
		switch {
		case fb.Kind == event.FeedbackOperator:
			operator = true
		case !it.Iterates(fb.Kind):
			continue
		case fb.Kind == event.FeedbackChecksFailed && (fb.HeadSHA != pr.HeadSHA || len(it.Checks) > 0 && !slices.Contains(it.Checks, fb.Check.Name)):
			continue
		}
		take = append(take, fb)
	}
	return take, operator
}

// automaticRounds counts the rounds feedback started without an operator.
func automaticRounds(pr *projection.PullRequest) int {
	n := 0
	for _, r := range pr.Rounds {
		if !slices.Contains(r.Kinds, event.FeedbackOperator) {
			n++
		}
	}
	return n
}

// MaxRoundsReached reports whether feedback waits on the flow's pull
// request that no round will take, because max_rounds is reached.
func MaxRoundsReached(f *projection.Flow) bool {
	if f.PR == nil || f.Publish == nil || f.Publish.Iterate == nil {
		return false
	}
	take, operator := roundFeedback(f)
	return len(take) > 0 && !operator && automaticRounds(f.PR) >= f.Publish.Iterate.MaxRounds
}

// roundTasks are a round's tasks: one with all the feedback, or (split:
// file) one per file the review comments name and one for the rest.
func roundTasks(st *projection.State, f *projection.Flow, n int, take []*event.PullRequestFeedbackData) []event.RoundTask {
	pr := f.PR
	instructions := ""
	split := flow.SplitRound
	if it := f.Publish.Iterate; it != nil {
		instructions, split = it.Prompt, it.Split
	}
	all := feedback.Round{N: n, Number: pr.Number, URL: pr.URL}
	for _, fb := range take {
		switch {
		case fb.Review != nil:
			all.Reviews = append(all.Reviews, *fb.Review)
		case fb.Check != nil:
			all.Checks = append(all.Checks, *fb.Check)
		default:
			all.Operator = append(all.Operator, fb.Message)
		}
	}
	ids := newIDs(st, f.ID)
	files := commentFiles(all.Reviews)
	if split != flow.SplitFile || len(files) < 2 {
		return []event.RoundTask{{ID: ids.next(fmt.Sprintf("round-%d", n)), Prompt: feedback.ComposeRound(instructions, &all), Files: files}}
	}
	var tasks []event.RoundTask
	rest := all
	rest.Reviews = nil
	for _, rv := range all.Reviews {
		general := rv
		general.Comments = nil
		for _, c := range rv.Comments {
			if c.Path == "" || !slices.Contains(files, c.Path) {
				general.Comments = append(general.Comments, c)
			}
		}
		rest.Reviews = append(rest.Reviews, general)
	}
	for k, file := range files {
		one := feedback.Round{N: n, Number: pr.Number, URL: pr.URL}
		for _, rv := range all.Reviews {
			mine := event.ReviewFeedback{ID: rv.ID, Author: rv.Author, URL: rv.URL}
			for _, c := range rv.Comments {
				if c.Path == file {
					mine.Comments = append(mine.Comments, c)
				}
			}
			if len(mine.Comments) > 0 {
				one.Reviews = append(one.Reviews, mine)
			}
		}
		tasks = append(tasks, event.RoundTask{ID: ids.next(fmt.Sprintf("round-%d-%d", n, k+1)), Prompt: feedback.ComposeRound(instructions, &one),
			Files: []string{file}})
	}
	if len(rest.Checks) > 0 || len(rest.Operator) > 0 || slices.ContainsFunc(rest.Reviews, func(rv event.ReviewFeedback) bool {
		return rv.Body != "" || len(rv.Comments) > 0
	}) {
		tasks = append(tasks, event.RoundTask{ID: ids.next(fmt.Sprintf("round-%d", n)), Prompt: feedback.ComposeRound(instructions, &rest)})
	}
	return tasks
}

// maxFileTasks bounds the tasks of a round split by file; comments on
// more files go to the round's general task.
const maxFileTasks = 20

// commentFiles are the files review comments name, sorted, at most
// maxFileTasks.
func commentFiles(reviews []event.ReviewFeedback) []string {
	var files []string
	for _, rv := range reviews {
		for _, c := range rv.Comments {
			if c.Path != "" && !slices.Contains(files, c.Path) {
				files = append(files, c.Path)
			}
		}
	}
	slices.Sort(files)
	if len(files) > maxFileTasks {
		files = files[:maxFileTasks]
	}
	return files
}

// taskIDs gives a round's tasks ids no task of the flow has.
type taskIDs struct {
	st    *projection.State
	flow  string
	taken map[string]bool
}

func newIDs(st *projection.State, flowID string) *taskIDs {
	return &taskIDs{st: st, flow: flowID, taken: map[string]bool{}}
}

func (t *taskIDs) next(want string) string {
	id := want
	for i := 2; t.taken[id] || t.st.Task(t.flow, id) != nil || drovertype.ValidID(id) != nil; i++ {
		id = fmt.Sprintf("%s-%d", want, i)
	}
	t.taken[id] = true
	return id
}

// prBuild puts a later build of a published flow on its pull request's
// branch: from it, to it, merging only the results it does not hold.
// false when nothing new is left to merge.
func prBuild(f *projection.Flow, d *event.IntegrationScheduledData, merge []event.DepResult) bool {
	pr := f.PR
	if pr == nil || pr.Number == 0 || pr.Head == "" {
		return true
	}
	d.Branch, d.Base = pr.Head, pr.Head
	for _, m := range merge {
		if !slices.Contains(pr.Merged, projection.MergedKey(m.Task, m.Commit)) {
			d.Merge = append(d.Merge, m)
		}
	}
	return len(d.Merge) > 0
}
