package github

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v84/github"

	"github.com/drover-dev/drover/internal/forge"
)

// Client is a GitHub forge.
type Client struct {
	c *gh.Client
}

var _ forge.Forge = (*Client)(nil)

// New opens a client. An empty BaseURL is api.github.com; anything else is
// a GitHub Enterprise server, as go-github's WithEnterpriseURLs reads it
// (https://ghe.example.com/ becomes https://ghe.example.com/api/v3/).
func New(cfg forge.Config) (*Client, error) {
	c := gh.NewClient(cfg.Client()).WithAuthToken(cfg.Token)
	if cfg.BaseURL != "" {
		var err error
		if c, err = c.WithEnterpriseURLs(cfg.BaseURL, cfg.BaseURL); err != nil {
			return nil, fmt.Errorf("forge: github: base_url %.200q: %w", cfg.BaseURL, err)
		}
	}
	return &Client{c: c}, nil
}

// wrap turns a go-github error into a forge.Error.
func wrap(op string, resp *gh.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &forge.Error{Kind: forge.GitHub, Op: op, Err: err}
	if resp != nil && resp.Response != nil {
		e.Status = resp.StatusCode
	}
	var rl *gh.RateLimitError
	var abuse *gh.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		e.RateLimited = true
	}
	return e
}

func split(repo string) (string, string, error) { return forge.SplitRepo(repo) }

// DefaultBranch reads the repository's default branch.
func (c *Client) DefaultBranch(ctx context.Context, repo string) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	r, resp, err := c.c.Repositories.Get(ctx, owner, name)
	if err != nil {
		return "", wrap("get repository", resp, err)
	}
	return r.GetDefaultBranch(), nil
}

// FindPullRequest lists the pull requests from head into base, newest
// first, in any state.
func (c *Client) FindPullRequest(ctx context.Context, repo, head, base string) (*forge.PullRequest, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	prs, resp, err := c.c.PullRequests.List(ctx, owner, name, &gh.PullRequestListOptions{
		State: "all", Head: owner + ":" + head, Base: base, ListOptions: gh.ListOptions{PerPage: 10},
	})
	if err != nil {
		return nil, wrap("find pull request", resp, err)
	}
	for _, p := range prs { // the list comes newest first
		if p.GetHead().GetRef() == head {
			return convert(p), nil
		}
	}
	return nil, nil
}

// CreatePullRequest opens a pull request, then adds its labels, reviewers
// and assignees.
func (c *Client) CreatePullRequest(ctx context.Context, repo string, p forge.Publication) (*forge.PullRequest, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.c.PullRequests.Create(ctx, owner, name, &gh.NewPullRequest{
		Title: gh.Ptr(p.Title), Head: gh.Ptr(p.Head), Base: gh.Ptr(p.Base), Body: gh.Ptr(p.Body), Draft: gh.Ptr(p.Draft),
	})
	if err != nil {
		return nil, wrap("create pull request", resp, err)
	}
	n := pr.GetNumber()
	if len(p.Labels) > 0 {
		if _, resp, err := c.c.Issues.AddLabelsToIssue(ctx, owner, name, n, p.Labels); err != nil {
			return convert(pr), wrap("add labels", resp, err)
		}
	}
	if len(p.Reviewers) > 0 {
		if _, resp, err := c.c.PullRequests.RequestReviewers(ctx, owner, name, n, gh.ReviewersRequest{Reviewers: p.Reviewers}); err != nil {
			return convert(pr), wrap("request reviewers", resp, err)
		}
	}
	if len(p.Assignees) > 0 {
		if _, resp, err := c.c.Issues.AddAssignees(ctx, owner, name, n, p.Assignees); err != nil {
			return convert(pr), wrap("add assignees", resp, err)
		}
	}
	return convert(pr), nil
}

// UpdatePullRequest sets the title and body.
func (c *Client) UpdatePullRequest(ctx context.Context, repo string, number int, p forge.Publication) (*forge.PullRequest, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.c.PullRequests.Edit(ctx, owner, name, number, &gh.PullRequest{Title: gh.Ptr(p.Title), Body: gh.Ptr(p.Body)})
	if err != nil {
		return nil, wrap("update pull request", resp, err)
	}
	return convert(pr), nil
}

// PullRequest reads one pull request.
func (c *Client) PullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.c.PullRequests.Get(ctx, owner, name, number)
	if err != nil {
		return nil, wrap("get pull request", resp, err)
	}
	return convert(pr), nil
}

// Comment adds an issue comment to the pull request, once per marker.
func (c *Client) Comment(ctx context.Context, repo string, number int, marker, body string) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages; page++ {
		cs, resp, err := c.c.Issues.ListComments(ctx, owner, name, number, opts)
		if err != nil {
			return "", wrap("list comments", resp, err)
		}
		for _, cm := range cs {
			if marker != "" && strings.Contains(cm.GetBody(), marker) {
				return cm.GetHTMLURL(), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	cm, resp, err := c.c.Issues.CreateComment(ctx, owner, name, number, &gh.IssueComment{Body: gh.Ptr(body)})
	if err != nil {
		return "", wrap("create comment", resp, err)
	}
	return cm.GetHTMLURL(), nil
}

// maxPages bounds the pages one listing reads.
const maxPages = 10

func convert(p *gh.PullRequest) *forge.PullRequest {
	st := forge.Open
	switch {
	case p.GetMerged() || p.MergedAt != nil:
		st = forge.Merged
	case p.GetState() == "closed":
		st = forge.Closed
	}
	return &forge.PullRequest{
		Number: p.GetNumber(), URL: p.GetHTMLURL(), State: st, Draft: p.GetDraft(),
		Head: p.GetHead().GetRef(), Base: p.GetBase().GetRef(), HeadSHA: p.GetHead().GetSHA(),
	}
}

// Reviews lists the reviews and, for each that requests changes, its line
// comments.
func (c *Client) Reviews(ctx context.Context, repo string, number int) ([]forge.Review, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	var out []forge.Review
	opts := &gh.ListOptions{PerPage: 100}
	for page := 0; page < maxPages; page++ {
		rs, resp, err := c.c.PullRequests.ListReviews(ctx, owner, name, number, opts)
		if err != nil {
			return nil, wrap("list reviews", resp, err)
		}
		for _, r := range rs {
			rv := forge.Review{ID: strconv.FormatInt(r.GetID(), 10), Author: r.GetUser().GetLogin(), Body: r.GetBody(),
				URL: r.GetHTMLURL(), CommitSHA: r.GetCommitID(), State: reviewState(r.GetState())}
			if rv.State == forge.ChangesRequested {
				if rv.Comments, err = c.reviewComments(ctx, owner, name, number, r.GetID()); err != nil {
					return nil, err
				}
			}
			out = append(out, rv)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

func reviewState(s string) forge.ReviewState {
	switch s {
	case "CHANGES_REQUESTED":
		return forge.ChangesRequested
	case "APPROVED":
		return forge.Approved
	}
	return forge.Commented
}

func (c *Client) reviewComments(ctx context.Context, owner, name string, number int, id int64) ([]forge.Comment, error) {
	cs, resp, err := c.c.PullRequests.ListReviewComments(ctx, owner, name, number, id, &gh.ListOptions{PerPage: 100})
	if err != nil {
		return nil, wrap("list review comments", resp, err)
	}
	out := make([]forge.Comment, 0, len(cs))
	for _, cm := range cs {
		line := cm.GetLine()
		if line == 0 {
			line = cm.GetOriginalLine()
		}
		out = append(out, forge.Comment{Path: cm.GetPath(), Line: line, Body: cm.GetBody(), Author: cm.GetUser().GetLogin()})
	}
	return out, nil
}

// logTail bounds a check's output text kept as its log tail.
const logTail = 4 << 10

// Checks lists the head commit's check runs (the latest of each) and its
// commit statuses.
func (c *Client) Checks(ctx context.Context, repo string, pr *forge.PullRequest) ([]forge.Check, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	if pr.HeadSHA == "" {
		return nil, nil
	}
	runs, resp, err := c.c.Checks.ListCheckRunsForRef(ctx, owner, name, pr.HeadSHA, &gh.ListCheckRunsOptions{
		Filter: gh.Ptr("latest"), ListOptions: gh.ListOptions{PerPage: 100},
	})
	if err != nil {
		return nil, wrap("list check runs", resp, err)
	}
	var out []forge.Check
	for _, r := range runs.CheckRuns {
		out = append(out, checkRun(r))
	}
	st, resp, err := c.c.Repositories.GetCombinedStatus(ctx, owner, name, pr.HeadSHA, &gh.ListOptions{PerPage: 100})
	if err != nil {
		return nil, wrap("get combined status", resp, err)
	}
	for _, s := range st.Statuses {
		out = append(out, forge.Check{ID: "status-" + s.GetContext(), Name: s.GetContext(), Status: statusState(s.GetState()),
			Conclusion: s.GetState(), Summary: s.GetDescription(), URL: s.GetTargetURL()})
	}
	return out, nil
}

func checkRun(r *gh.CheckRun) forge.Check {
	ch := forge.Check{ID: strconv.FormatInt(r.GetID(), 10), Name: r.GetName(), Conclusion: r.GetConclusion(), URL: r.GetHTMLURL()}
	switch {
	case r.GetStatus() != "completed":
		ch.Status = forge.CheckPending
	case r.GetConclusion() == "success" || r.GetConclusion() == "neutral" || r.GetConclusion() == "skipped":
		ch.Status = forge.CheckPassed
	default: // failure, timed_out, cancelled, action_required, startup_failure, stale
		ch.Status = forge.CheckFailed
	}
	if o := r.GetOutput(); o != nil {
		ch.Summary = strings.TrimSpace(o.GetTitle() + "\n" + o.GetSummary())
		ch.LogTail = forge.Tail(o.GetText(), logTail)
	}
	return ch
}

func statusState(s string) forge.CheckStatus {
	switch s {
	case "success":
		return forge.CheckPassed
	case "failure", "error":
		return forge.CheckFailed
	}
	return forge.CheckPending
}
