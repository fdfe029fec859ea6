package event

import (
	"github.com/drover-dev/drover/internal/flow"
)

// A flow published as a pull request, and the rounds its reviews and checks
// start (docs/forges.md). The controller decides to publish and to start a
// round; it performs the forge calls after recording the decision, and
// records what the forge answered and what it saw there.
const (
	// The controller's decision (or an operator's request) to open or
	// update the flow's pull request.
	PullRequestRequested Type = "pull_request_requested"
	// What the forge answered a pull_request_requested (controller).
	PullRequestPublished Type = "pull_request_published"
	// The pull request's state and its head's checks, when they change
	// (controller, following the pull request).
	PullRequestObserved Type = "pull_request_observed"
	// A review that requests changes, a failed check, or an operator's
	// `controller iterate`: what may start a round.
	PullRequestFeedback Type = "pull_request_feedback"
	// The controller's decision to start a round of work on the pull
	// request's branch.
	ReviewRoundStarted Type = "review_round_started"
)

// PullRequestRequestedData asks for the flow's pull request to be opened,
// or updated if the forge has one from Head into Base: the N-th request of
// the flow, made in the flow's Round.
type PullRequestRequestedData struct {
	N     int    `json:"n"`
	Round int    `json:"round,omitempty"`
	Forge string `json:"forge"`
	Repo  string `json:"repo"`
	Head  string `json:"head"`
	// Base "" is the repository's default branch.
	Base      string   `json:"base,omitempty"`
	Title     string   `json:"title"`
	Body      string   `json:"body"`
	Draft     bool     `json:"draft,omitempty"`
	Labels    []string `json:"labels,omitempty"`
	Reviewers []string `json:"reviewers,omitempty"`
	Assignees []string `json:"assignees,omitempty"`
	// Comment is posted on the pull request once this request is
	// published (what a round did); "" posts nothing.
	Comment string `json:"comment,omitempty"`
	// Reason is an operator's, for `controller publish`.
	Reason string `json:"reason,omitempty"`
}

// PullRequestPublishedData is what the forge answered request N: the pull
// request, or the error that ended the attempt to publish (AUTH_FAILED for
// a refused token, REPO_NOT_FOUND, RUNTIME_ERROR for another refusal).
type PullRequestPublishedData struct {
	N       int    `json:"n"`
	Number  int    `json:"number,omitempty"`
	URL     string `json:"url,omitempty"`
	State   string `json:"state,omitempty"`
	Head    string `json:"head,omitempty"`
	Base    string `json:"base,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	// Created says this request opened it; otherwise it was found by its
	// head and updated (or left alone when closed).
	Created bool `json:"created,omitempty"`
	// Comment is where the request's comment went.
	Comment string     `json:"comment,omitempty"`
	Error   *ErrorInfo `json:"error,omitempty"`
}

// CheckSummary counts the checks of the pull request's head commit.
type CheckSummary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
	// Failing names the failed ones (at most 20).
	Failing []string `json:"failing,omitempty"`
}

// PullRequestObservedData is the pull request as the N-th observation
// that changed something saw it.
type PullRequestObservedData struct {
	N       int          `json:"n"`
	Number  int          `json:"number"`
	State   string       `json:"state"`
	HeadSHA string       `json:"head_sha,omitempty"`
	Checks  CheckSummary `json:"checks"`
}

// What a feedback is.
const (
	FeedbackChangesRequested = flow.IterateChangesRequested // a review requested changes
	FeedbackChecksFailed     = flow.IterateChecksFailed     // a check of the head failed
	FeedbackOperator         = "operator"                   // controller iterate
)

// ReviewComment is a reviewer's comment on a line of a file.
type ReviewComment struct {
	Path   string `json:"path,omitempty"`
	Line   int    `json:"line,omitempty"`
	Body   string `json:"body"`
	Author string `json:"author,omitempty"`
}

// ReviewFeedback is a review that requested changes.
type ReviewFeedback struct {
	ID       string          `json:"id"`
	Author   string          `json:"author,omitempty"`
	Body     string          `json:"body,omitempty"`
	URL      string          `json:"url,omitempty"`
	Comments []ReviewComment `json:"comments,omitempty"`
}

// CheckFeedback is a check of the head commit that failed.
type CheckFeedback struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Conclusion string `json:"conclusion,omitempty"`
	Summary    string `json:"summary,omitempty"`
	LogTail    string `json:"log_tail,omitempty"`
	URL        string `json:"url,omitempty"`
}

// PullRequestFeedbackData is one thing said about the pull request that
// may start a round. Key names it among the flow's feedback (the event's
// id is pull_request_feedback:<flow>:<key>): the forge's review id, the
// check's id at the head commit, or the operator's request.
type PullRequestFeedbackData struct {
	Kind    string          `json:"kind"`
	Key     string          `json:"key"`
	HeadSHA string          `json:"head_sha,omitempty"`
	Review  *ReviewFeedback `json:"review,omitempty"`
	Check   *CheckFeedback  `json:"check,omitempty"`
	// Message is an operator's, for `controller iterate`.
	Message string `json:"message,omitempty"`
}

// RoundTask is one task of a review round: its id, its prompt (the
// feedback it answers), and the files the comments it carries name.
type RoundTask struct {
	ID     string   `json:"id"`
	Prompt string   `json:"prompt"`
	Files  []string `json:"files,omitempty"`
}

// ReviewRoundStartedData is the controller's decision to start round N:
// the feedback it answers (by key) and its tasks, which start from Base,
// the pull request's branch; their results are pushed to it.
type ReviewRoundStartedData struct {
	N        int         `json:"n"`
	Feedback []string    `json:"feedback"`
	Base     string      `json:"base"`
	Tasks    []RoundTask `json:"tasks"`
}
