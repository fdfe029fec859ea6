package projection

import (
	"regexp"
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
)

// PullRequest is a flow's pull request (GitLab: merge request): what was
// asked of the forge, what it answered, what the controller saw there and
// the review rounds it started (docs/forges.md).
type PullRequest struct {
	Forge   string `json:"forge"`
	Repo    string `json:"repo"`
	Number  int    `json:"number,omitempty"`
	URL     string `json:"url,omitempty"`
	State   string `json:"state,omitempty"` // open, closed or merged; "" until published
	Head    string `json:"head,omitempty"`
	Base    string `json:"base,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	// Requests counts the flow's publish requests; RequestRound is the
	// flow's round of the latest; Pending is the latest while the forge
	// has not answered it.
	Requests     int                             `json:"requests"`
	RequestRound int                             `json:"request_round"`
	Pending      *event.PullRequestRequestedData `json:"pending,omitempty"`
	// Error is why the latest request failed; PublishedAt when the latest
	// answer came.
	Error       *event.ErrorInfo `json:"error,omitempty"`
	PublishedAt time.Time        `json:"published_at,omitzero"`
	// Observed counts the observations recorded; Checks is the latest
	// one's count of the head commit's checks.
	Observed int                 `json:"observed,omitempty"`
	Checks   *event.CheckSummary `json:"checks,omitempty"`
	// Feedback is what reviews, checks and operators said that no round
	// has taken yet (the latest MaxPendingFeedback); Dropped counts the
	// ones let go beyond that.
	Feedback []*event.PullRequestFeedbackData `json:"feedback,omitempty"`
	Dropped  int                              `json:"dropped,omitempty"`
	Rounds   []*ReviewRound                   `json:"rounds,omitempty"`
	// Merged are the results (TASK@COMMIT) the pull request's branch
	// holds: its first build's, then each later build's on it. A later
	// build merges only what is not there yet.
	Merged []string `json:"merged,omitempty"`
}

// MergedKey names a task's result among PullRequest.Merged.
func MergedKey(task, commit string) string { return task + "@" + commit }

// merged records results a build put on the pull request's branch.
func (pr *PullRequest) merged(results []event.DepResult) {
	for _, m := range results {
		if k := MergedKey(m.Task, m.Commit); !slices.Contains(pr.Merged, k) {
			pr.Merged = append(pr.Merged, k)
		}
	}
}

// ReviewRound is one round of work on the pull request's branch.
type ReviewRound struct {
	N int `json:"n"`
	// FlowRound is the flow's round it runs in (Flow.Round).
	FlowRound int `json:"flow_round"`
	// State is running, then succeeded or failed.
	State     string    `json:"state"`
	Tasks     []string  `json:"tasks"`
	Feedback  []string  `json:"feedback"`
	Kinds     []string  `json:"kinds"` // what the feedback was: changes_requested, checks_failed, operator
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Commit is where the round left the pull request's branch.
	Commit string `json:"commit,omitempty"`
}

// Review round states.
const (
	RoundRunning   = "running"
	RoundSucceeded = "succeeded"
	RoundFailed    = "failed"
)

// MaxPendingFeedback bounds the feedback a pull request keeps waiting for
// a round.
const MaxPendingFeedback = 50

// Round returns the latest review round, nil before any.
func (pr *PullRequest) Round() *ReviewRound {
	if pr == nil || len(pr.Rounds) == 0 {
		return nil
	}
	return pr.Rounds[len(pr.Rounds)-1]
}

// Limits of what the publish events carry.
const (
	maxPRBody     = 64 << 10
	maxRoundTasks = 50
)

var feedbackKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// checkPRRequest checks a request against itself.
func checkPRRequest(ev *event.Event, d *event.PullRequestRequestedData) error {
	switch {
	case d.N < 1:
		return malformed("pull_request_requested %s says it is request %d", ev.ID, d.N)
	case drovertype.ValidID(d.Forge) != nil:
		return malformed("pull_request_requested of flow %s names forge %.70q", ev.Flow, d.Forge)
	case flow.ValidForgeRepo(d.Repo) != nil:
		return malformed("pull_request_requested of flow %s names repository %.200q", ev.Flow, d.Repo)
	case flow.ValidBase(d.Base) != nil:
		return malformed("pull_request_requested of flow %s into base %.200q", ev.Flow, d.Base)
	case d.Title == "" || len(d.Title) > 1024 || len(d.Body) > maxPRBody || len(d.Comment) > maxPRBody:
		return malformed("pull_request_requested of flow %s with a title of %d bytes, a body of %d, a comment of %d",
			ev.Flow, len(d.Title), len(d.Body), len(d.Comment))
	}
	if _, ok := drovertype.ParseIntegrationBranch(ev.Flow, d.Head); !ok {
		return malformed("pull_request_requested of flow %s from %.200q, not an integration branch of the flow", ev.Flow, d.Head)
	}
	return nil
}

func (s *State) pullRequestRequested(ev *event.Event, d *event.PullRequestRequestedData) error {
	if err := checkPRRequest(ev, d); err != nil {
		return err
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	if f.Publish == nil || f.Publish.PullRequest == nil {
		return contradiction("pull_request_requested of flow %s, which has no publish section", f.ID)
	}
	pr := f.PR
	requests := 0
	if pr != nil {
		requests = pr.Requests
	}
	switch {
	case d.N > requests+1:
		return contradiction("pull_request_requested %d of flow %s, whose next request is %d", d.N, f.ID, requests+1)
	case d.N <= requests || !f.State.Terminal() || d.Round != f.Round:
		return nil // answered by another request, or decided before the flow was reopened
	}
	if pr == nil {
		pr = &PullRequest{}
		f.PR = pr
	}
	pr.Forge, pr.Repo = d.Forge, d.Repo
	if pr.Number == 0 {
		pr.Head, pr.Base = d.Head, d.Base
	}
	req := *d
	pr.Requests, pr.RequestRound, pr.Pending = d.N, d.Round, &req
	s.mark(keyFlow + f.ID)
	return nil
}

func (s *State) pullRequestPublished(ev *event.Event, d *event.PullRequestPublishedData) error {
	switch {
	case d.N < 1 || keyNumber(ev.ID) != d.N:
		return malformed("pull_request_published %s says it answers request %d", ev.ID, d.N)
	case d.Error == nil && (d.Number < 1 || !prState(d.State)):
		return malformed("pull_request_published %s of pull request %d in state %.40q", ev.ID, d.Number, d.State)
	case d.Error == nil && d.Head != "":
		if _, ok := drovertype.ParseIntegrationBranch(ev.Flow, d.Head); !ok {
			return malformed("pull_request_published %s from %.200q, not an integration branch of the flow", ev.ID, d.Head)
		}
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	pr := f.PR
	switch {
	case pr == nil || d.N > pr.Requests:
		return contradiction("pull_request_published of request %d of flow %s, which was never made", d.N, f.ID)
	case d.N < pr.Requests || pr.Pending == nil:
		return nil // an answer to an earlier request, or this one answered already
	}
	pr.Pending, pr.PublishedAt, pr.Error = nil, ev.Time, d.Error
	if d.Error == nil {
		pr.Number, pr.URL, pr.State, pr.HeadSHA = d.Number, d.URL, d.State, d.HeadSHA
		if d.Head != "" {
			pr.Head = d.Head
		}
		if d.Base != "" {
			pr.Base = d.Base
		}
		if in := f.Integration; in != nil && in.State == drovertype.IntegrationSucceeded && in.Branch == pr.Head {
			pr.merged(in.Merge)
		}
	}
	s.mark(keyFlow + f.ID)
	return nil
}

func prState(st string) bool {
	return st == string(forge.Open) || st == string(forge.Closed) || st == string(forge.Merged)
}

func (s *State) pullRequestObserved(ev *event.Event, d *event.PullRequestObservedData) error {
	switch {
	case d.N < 1 || keyNumber(ev.ID) != d.N:
		return malformed("pull_request_observed %s says it is observation %d", ev.ID, d.N)
	case d.Number < 1 || !prState(d.State):
		return malformed("pull_request_observed %s of pull request %d in state %.40q", ev.ID, d.Number, d.State)
	case d.Checks.Passed < 0 || d.Checks.Failed < 0 || d.Checks.Pending < 0 || len(d.Checks.Failing) > 20:
		return malformed("pull_request_observed %s with checks %+v", ev.ID, d.Checks)
	}
	f, pr, err := s.published(ev)
	if err != nil {
		return err
	}
	switch {
	case d.Number != pr.Number:
		return contradiction("pull_request_observed of pull request %d of flow %s, whose pull request is %d", d.Number, f.ID, pr.Number)
	case d.N > pr.Observed+1:
		return contradiction("pull_request_observed %d of flow %s, whose next observation is %d", d.N, f.ID, pr.Observed+1)
	case d.N <= pr.Observed:
		return nil
	}
	checks := d.Checks
	pr.Observed, pr.State, pr.HeadSHA, pr.Checks = d.N, d.State, d.HeadSHA, &checks
	s.mark(keyFlow + f.ID)
	return nil
}

// published returns the flow an event is about and its pull request, or
// the contradiction of an event about a pull request never published:
// what is seen on one, and a round of work on it, come after it is.
func (s *State) published(ev *event.Event) (*Flow, *PullRequest, error) {
	f, err := s.flow(ev)
	if err != nil {
		return nil, nil, err
	}
	if f.PR == nil || f.PR.Number == 0 {
		return nil, nil, contradiction("%s of flow %s, which has no pull request", ev.Type, f.ID)
	}
	return f, f.PR, nil
}

// checkFeedback checks a feedback against itself.
func checkFeedback(ev *event.Event, d *event.PullRequestFeedbackData) error {
	switch {
	case !feedbackKeyRE.MatchString(d.Key) || ev.ID != drovertype.EventID(ev.Type, ev.Flow+":"+d.Key):
		return malformed("pull_request_feedback %s names key %.140q", ev.ID, d.Key)
	case d.Kind == event.FeedbackChangesRequested && (d.Review == nil || d.Check != nil):
		return malformed("pull_request_feedback %s of kind %s without its review", ev.ID, d.Kind)
	case d.Kind == event.FeedbackChecksFailed && (d.Check == nil || d.Review != nil):
		return malformed("pull_request_feedback %s of kind %s without its check", ev.ID, d.Kind)
	case d.Kind == event.FeedbackOperator && (d.Check != nil || d.Review != nil):
		return malformed("pull_request_feedback %s of kind %s with a review or a check", ev.ID, d.Kind)
	case d.Kind != event.FeedbackChangesRequested && d.Kind != event.FeedbackChecksFailed && d.Kind != event.FeedbackOperator:
		return malformed("pull_request_feedback %s of kind %.40q", ev.ID, d.Kind)
	}
	return nil
}

func (s *State) pullRequestFeedback(ev *event.Event, d *event.PullRequestFeedbackData) error {
	if err := checkFeedback(ev, d); err != nil {
		return err
	}
	f, pr, err := s.published(ev)
	if err != nil {
		return err
	}
	fb := *d
	pr.Feedback = append(pr.Feedback, &fb)
	if over := len(pr.Feedback) - MaxPendingFeedback; over > 0 {
		pr.Feedback = slices.Delete(pr.Feedback, 0, over)
		pr.Dropped += over
	}
	s.mark(keyFlow + f.ID)
	return nil
}

// checkRound checks a round's decision against itself.
func checkRound(ev *event.Event, d *event.ReviewRoundStartedData) error {
	switch {
	case d.N < 1 || keyNumber(ev.ID) != d.N:
		return malformed("review_round_started %s says it is round %d", ev.ID, d.N)
	case len(d.Tasks) == 0 || len(d.Tasks) > maxRoundTasks:
		return malformed("review_round_started %s with %d tasks", ev.ID, len(d.Tasks))
	case len(d.Feedback) == 0 || len(d.Feedback) > MaxPendingFeedback:
		return malformed("review_round_started %s answering %d feedback", ev.ID, len(d.Feedback))
	}
	if _, ok := drovertype.ParseIntegrationBranch(ev.Flow, d.Base); !ok {
		return malformed("review_round_started %s on %.200q, not an integration branch of the flow", ev.ID, d.Base)
	}
	for i, t := range d.Tasks {
		switch {
		case drovertype.ValidID(t.ID) != nil:
			return malformed("review_round_started %s: task %.70q", ev.ID, t.ID)
		case t.Prompt == "" || len(t.Prompt) > flow.MaxPromptSize:
			return malformed("review_round_started %s: task %s with a prompt of %d bytes", ev.ID, t.ID, len(t.Prompt))
		case slices.ContainsFunc(d.Tasks[:i], func(o event.RoundTask) bool { return o.ID == t.ID }):
			return malformed("review_round_started %s names task %s twice", ev.ID, t.ID)
		}
	}
	return nil
}

func (s *State) reviewRoundStarted(ev *event.Event, d *event.ReviewRoundStartedData) error {
	if err := checkRound(ev, d); err != nil {
		return err
	}
	f, pr, err := s.published(ev)
	if err != nil {
		return err
	}
	switch {
	case d.N > len(pr.Rounds)+1:
		return contradiction("review_round_started %d of flow %s, whose next round is %d", d.N, f.ID, len(pr.Rounds)+1)
	case d.N <= len(pr.Rounds) || !f.State.Terminal():
		return nil // started already, or the flow was reopened meanwhile
	case f.RoundPlan == nil:
		return contradiction("review_round_started of flow %s, which has no plan for a round's tasks", f.ID)
	case d.Base != pr.Head:
		return contradiction("review_round_started of flow %s on %s, not its pull request's branch %s", f.ID, d.Base, pr.Head)
	}
	var kinds []string
	for _, k := range d.Feedback {
		i := slices.IndexFunc(pr.Feedback, func(fb *event.PullRequestFeedbackData) bool { return fb.Key == k })
		if i < 0 {
			return contradiction("review_round_started of flow %s answers feedback %s, which is not waiting", f.ID, k)
		}
		if kind := pr.Feedback[i].Kind; !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	for _, t := range d.Tasks {
		if s.Task(f.ID, t.ID) != nil {
			return contradiction("review_round_started of flow %s adds task %s, which it has", f.ID, t.ID)
		}
	}
	pr.Feedback = slices.DeleteFunc(pr.Feedback, func(fb *event.PullRequestFeedbackData) bool { return slices.Contains(d.Feedback, fb.Key) })
	f.State, f.CompletedAt, f.Round = drovertype.FlowRunning, time.Time{}, f.Round+1
	r := &ReviewRound{N: d.N, FlowRound: f.Round, State: RoundRunning, Feedback: slices.Clone(d.Feedback), Kinds: kinds, StartedAt: ev.Time}
	for _, t := range d.Tasks {
		task := &Task{Flow: f.ID, ID: t.ID, State: drovertype.TaskPending, Runtime: f.RoundPlan.Worker.Name, Plan: s.sharedPlan(f.RoundPlan),
			Prompt: t.Prompt, Base: d.Base, ReviewRound: d.N, UpdatedAt: ev.Time}
		s.putTask(task)
		f.Order = append(f.Order, t.ID)
		r.Tasks = append(r.Tasks, t.ID)
	}
	pr.Rounds = append(pr.Rounds, r)
	s.mark(keyFlow + f.ID)
	s.mark(keyFlowDef + f.ID) // its order grew
	return nil
}

// endRound records how the flow's running review round ended, when the
// flow completes the round it runs in.
func (s *State) endRound(f *Flow, at time.Time) {
	r := f.PR.Round()
	if r == nil || r.State != RoundRunning || r.FlowRound != f.Round {
		return
	}
	r.State, r.EndedAt = RoundSucceeded, at
	for _, id := range r.Tasks {
		if t := s.Task(f.ID, id); t == nil || t.State != drovertype.TaskSucceeded {
			r.State = RoundFailed
		}
	}
	switch in := f.Integration; {
	case in != nil && in.N == f.Round+1 && in.State == drovertype.IntegrationSucceeded:
		r.Commit = in.Commit
	default:
		r.State = RoundFailed
	}
}

// checkPublishSubmitted checks a flow's resolved publish section as submitted.
func checkPublishSubmitted(flowID string, d *event.FlowSubmittedData) error {
	if d.Publish == nil {
		if d.RoundPlan != nil {
			return malformed("flow_submitted of flow %s has a round plan and no publish section", flowID)
		}
		return nil
	}
	if err := d.Publish.Validate(); err != nil {
		return malformed("flow_submitted of flow %s: its publish section does not validate: %v", flowID, err)
	}
	if pr := d.Publish.PullRequest; pr == nil || drovertype.ValidID(pr.Forge) != nil || flow.ValidForgeRepo(pr.Repo) != nil {
		return malformed("flow_submitted of flow %s publishes to no forge and repository", flowID)
	}
	if p := d.RoundPlan; p != nil {
		for _, n := range append([]string{p.Worker.Name}, p.Retry.Fallback...) {
			if err := drovertype.ValidID(n); err != nil {
				return malformed("flow_submitted of flow %s: its round plan names runtime %.70q: %v", flowID, n, err)
			}
		}
	}
	return nil
}
