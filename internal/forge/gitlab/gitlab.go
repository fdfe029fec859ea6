package gitlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/drover-dev/drover/internal/forge"
)

// Client is a GitLab forge. A repository is the project's path with its
// namespace (group/subgroup/name).
type Client struct {
	c *gl.Client
}

var _ forge.Forge = (*Client)(nil)

// New opens a client; an empty BaseURL is gitlab.com. Retries are
// Drover's (with backoff, between polls), not client-go's.
func New(cfg forge.Config) (*Client, error) {
	opts := []gl.ClientOptionFunc{gl.WithHTTPClient(cfg.Client()), gl.WithoutRetries()}
	if cfg.BaseURL != "" {
		opts = append(opts, gl.WithBaseURL(cfg.BaseURL))
	}
	c, err := gl.NewClient(cfg.Token, opts...)
	if err != nil {
		return nil, fmt.Errorf("forge: gitlab: %w", err)
	}
	return &Client{c: c}, nil
}

func wrap(op string, resp *gl.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &forge.Error{Kind: forge.GitLab, Op: op, Err: err}
	if resp != nil && resp.Response != nil {
		e.Status = resp.StatusCode
	}
	var er *gl.ErrorResponse
	if e.Status == 0 && errors.As(err, &er) && er.Response != nil {
		e.Status = er.Response.StatusCode
	}
	e.RateLimited = e.Status == http.StatusTooManyRequests
	return e
}

func checkRepo(repo string) error {
	if repo == "" || strings.HasPrefix(repo, "/") || strings.HasSuffix(repo, "/") || !strings.Contains(repo, "/") {
		return fmt.Errorf("forge: gitlab project %.200q is not NAMESPACE/NAME", repo)
	}
	return nil
}

// DefaultBranch reads the project's default branch.
func (c *Client) DefaultBranch(ctx context.Context, repo string) (string, error) {
	if err := checkRepo(repo); err != nil {
		return "", err
	}
	p, resp, err := c.c.Projects.GetProject(repo, nil, gl.WithContext(ctx))
	if err != nil {
		return "", wrap("get project", resp, err)
	}
	return p.DefaultBranch, nil
}

// FindPullRequest lists the merge requests from head into base, newest
// first, in any state.
func (c *Client) FindPullRequest(ctx context.Context, repo, head, base string) (*forge.PullRequest, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	opt := &gl.ListProjectMergeRequestsOptions{
		SourceBranch: gl.Ptr(head), State: gl.Ptr("all"),
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("desc"), ListOptions: gl.ListOptions{PerPage: 10},
	}
	if base != "" {
		opt.TargetBranch = gl.Ptr(base)
	}
	mrs, resp, err := c.c.MergeRequests.ListProjectMergeRequests(repo, opt, gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("find merge request", resp, err)
	}
	for _, m := range mrs {
		if m.SourceBranch == head {
			return convert(m), nil
		}
	}
	return nil, nil
}

func convert(m *gl.BasicMergeRequest) *forge.PullRequest {
	st := forge.Open
	switch m.State {
	case "merged":
		st = forge.Merged
	case "closed", "locked":
		st = forge.Closed
	}
	return &forge.PullRequest{Number: int(m.IID), URL: m.WebURL, State: st, Draft: m.Draft,
		Head: m.SourceBranch, Base: m.TargetBranch, HeadSHA: m.SHA}
}

// CreatePullRequest opens a merge request with its labels, and its
// reviewers and assignees found by username.
func (c *Client) CreatePullRequest(ctx context.Context, repo string, p forge.Publication) (*forge.PullRequest, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	title := p.Title
	if p.Draft && !strings.HasPrefix(title, "Draft:") {
		title = "Draft: " + title
	}
	opt := &gl.CreateMergeRequestOptions{Title: gl.Ptr(title), Description: gl.Ptr(p.Body),
		SourceBranch: gl.Ptr(p.Head), TargetBranch: gl.Ptr(p.Base)}
	if len(p.Labels) > 0 {
		opt.Labels = gl.Ptr(gl.LabelOptions(p.Labels))
	}
	var err error
	if opt.ReviewerIDs, err = c.userIDs(ctx, p.Reviewers); err != nil {
		return nil, err
	}
	if opt.AssigneeIDs, err = c.userIDs(ctx, p.Assignees); err != nil {
		return nil, err
	}
	m, resp, err := c.c.MergeRequests.CreateMergeRequest(repo, opt, gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("create merge request", resp, err)
	}
	return convert(&m.BasicMergeRequest), nil
}

// userIDs finds users by username; nil for none.
func (c *Client) userIDs(ctx context.Context, names []string) (*[]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		us, resp, err := c.c.Users.ListUsers(&gl.ListUsersOptions{Username: gl.Ptr(n)}, gl.WithContext(ctx))
		if err != nil {
			return nil, wrap("find user "+n, resp, err)
		}
		if len(us) == 0 {
			return nil, &forge.Error{Kind: forge.GitLab, Op: "find user", Status: http.StatusUnprocessableEntity,
				Err: fmt.Errorf("no user %.100q", n)}
		}
		ids = append(ids, us[0].ID)
	}
	return &ids, nil
}

// UpdatePullRequest sets the title and description.
func (c *Client) UpdatePullRequest(ctx context.Context, repo string, number int, p forge.Publication) (*forge.PullRequest, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	m, resp, err := c.c.MergeRequests.UpdateMergeRequest(repo, int64(number), &gl.UpdateMergeRequestOptions{
		Title: gl.Ptr(p.Title), Description: gl.Ptr(p.Body),
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("update merge request", resp, err)
	}
	return convert(&m.BasicMergeRequest), nil
}

// PullRequest reads one merge request.
func (c *Client) PullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	m, resp, err := c.c.MergeRequests.GetMergeRequest(repo, int64(number), nil, gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("get merge request", resp, err)
	}
	return convert(&m.BasicMergeRequest), nil
}

// maxPages bounds the pages one listing reads.
const maxPages = 10

// Comment adds a note to the merge request, once per marker.
func (c *Client) Comment(ctx context.Context, repo string, number int, marker, body string) (string, error) {
	if err := checkRepo(repo); err != nil {
		return "", err
	}
	opt := &gl.ListMergeRequestNotesOptions{ListOptions: gl.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages && marker != ""; page++ {
		ns, resp, err := c.c.Notes.ListMergeRequestNotes(repo, int64(number), opt, gl.WithContext(ctx))
		if err != nil {
			return "", wrap("list notes", resp, err)
		}
		for _, n := range ns {
			if strings.Contains(n.Body, marker) {
				return fmt.Sprintf("note %d", n.ID), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	n, resp, err := c.c.Notes.CreateMergeRequestNote(repo, int64(number), &gl.CreateMergeRequestNoteOptions{Body: gl.Ptr(body)}, gl.WithContext(ctx))
	if err != nil {
		return "", wrap("create note", resp, err)
	}
	return fmt.Sprintf("note %d", n.ID), nil
}

// Reviews are the reviewers whose state is requested_changes, each with
// the unresolved notes they wrote (file and line for a diff note). A
// reviewer's review is named by them and their latest such note, so a
// reviewer who writes more after a round asks again.
func (c *Client) Reviews(ctx context.Context, repo string, number int) ([]forge.Review, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	rs, resp, err := c.c.MergeRequests.GetMergeRequestReviewers(repo, int64(number), gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("list reviewers", resp, err)
	}
	var notes []*gl.Note
	var out []forge.Review
	for _, r := range rs {
		if r.User == nil {
			continue
		}
		rv := forge.Review{Author: r.User.Username, State: forge.Commented}
		switch r.State {
		case "requested_changes":
			rv.State = forge.ChangesRequested
		case "approved":
			rv.State = forge.Approved
		}
		var last int64
		if rv.State == forge.ChangesRequested {
			if notes == nil {
				if notes, err = c.openNotes(ctx, repo, number); err != nil {
					return nil, err
				}
			}
			for _, n := range notes {
				if n.Author.Username != r.User.Username {
					continue
				}
				cm := forge.Comment{Body: n.Body, Author: n.Author.Username}
				if p := n.Position; p != nil {
					cm.Path, cm.Line = p.NewPath, int(p.NewLine)
					if cm.Path == "" {
						cm.Path, cm.Line = p.OldPath, int(p.OldLine)
					}
				}
				rv.Comments = append(rv.Comments, cm)
				last = max(last, n.ID)
			}
		}
		rv.ID = fmt.Sprintf("%d-%d", r.User.ID, last)
		out = append(out, rv)
	}
	return out, nil
}

// openNotes are the merge request's notes that are resolvable and not
// resolved, system notes left out.
func (c *Client) openNotes(ctx context.Context, repo string, number int) ([]*gl.Note, error) {
	opt := &gl.ListMergeRequestDiscussionsOptions{ListOptions: gl.ListOptions{PerPage: 100}}
	out := []*gl.Note{}
	for page := 0; page < maxPages; page++ {
		ds, resp, err := c.c.Discussions.ListMergeRequestDiscussions(repo, int64(number), opt, gl.WithContext(ctx))
		if err != nil {
			return nil, wrap("list discussions", resp, err)
		}
		for _, d := range ds {
			for _, n := range d.Notes {
				if !n.System && n.Resolvable && !n.Resolved {
					out = append(out, n)
				}
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	return out, nil
}

// logTail bounds the end of a failed job's trace kept.
const logTail = 4 << 10

// maxTrace bounds what is read of a job's trace to find its end.
const maxTrace = 4 << 20

// Checks are the jobs of the latest pipeline of the head commit: one
// check per job, a failed one with the end of its trace; a pipeline
// without jobs listed is one check of its own.
func (c *Client) Checks(ctx context.Context, repo string, pr *forge.PullRequest) ([]forge.Check, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	ps, resp, err := c.c.MergeRequests.ListMergeRequestPipelines(repo, int64(pr.Number), gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("list pipelines", resp, err)
	}
	var p *gl.PipelineInfo
	for _, q := range ps { // newest first
		if q.SHA == pr.HeadSHA {
			p = q
			break
		}
	}
	if p == nil {
		return nil, nil
	}
	jobs, resp, err := c.c.Jobs.ListPipelineJobs(repo, p.ID, &gl.ListJobsOptions{ListOptions: gl.ListOptions{PerPage: 100}}, gl.WithContext(ctx))
	if err != nil {
		return nil, wrap("list jobs", resp, err)
	}
	if len(jobs) == 0 {
		return []forge.Check{{ID: fmt.Sprintf("pipeline-%d", p.ID), Name: "pipeline", Status: jobStatus(p.Status),
			Conclusion: p.Status, URL: p.WebURL}}, nil
	}
	out := make([]forge.Check, 0, len(jobs))
	for _, j := range jobs {
		ch := forge.Check{ID: fmt.Sprintf("%d", j.ID), Name: j.Name, Status: jobStatus(j.Status), Conclusion: j.Status,
			Summary: j.FailureReason, URL: j.WebURL}
		if j.AllowFailure && ch.Status == forge.CheckFailed {
			ch.Status = forge.CheckPassed // allowed to fail: the pipeline passes
		}
		if ch.Status == forge.CheckFailed {
			if ch.LogTail, err = c.trace(ctx, repo, j.ID); err != nil {
				return nil, err
			}
		}
		out = append(out, ch)
	}
	return out, nil
}

func (c *Client) trace(ctx context.Context, repo string, job int64) (string, error) {
	r, resp, err := c.c.Jobs.GetTraceFile(repo, job, gl.WithContext(ctx))
	if err != nil {
		return "", wrap("get job trace", resp, err)
	}
	if n := r.Size(); n > maxTrace {
		if _, err := r.Seek(n-maxTrace, io.SeekStart); err != nil {
			return "", fmt.Errorf("forge: gitlab: job trace: %w", err)
		}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("forge: gitlab: job trace: %w", err)
	}
	return forge.Tail(string(b), logTail), nil
}

func jobStatus(s string) forge.CheckStatus {
	switch s {
	case "success", "skipped", "manual":
		return forge.CheckPassed
	case "failed", "canceled", "canceling":
		return forge.CheckFailed
	}
	return forge.CheckPending // created, pending, running, preparing, scheduled, waiting_for_resource
}
