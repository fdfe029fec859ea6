package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/drover-dev/drover/internal/forge"
)

// Client is a Gitea forge. The SDK's client takes its context as a
// setting rather than per call, so calls hold mu, one at a time.
type Client struct {
	cfg forge.Config
	mu  sync.Mutex
	c   *sdk.Client // made at the first call: making it asks the server its version
}

var _ forge.Forge = (*Client)(nil)

// New prepares a client; Gitea has no public service, so BaseURL (the
// instance's root, https://gitea.example.com) is required.
func New(cfg forge.Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("forge: gitea: base_url is required (the instance's root URL)")
	}
	return &Client{cfg: cfg}, nil
}

// client returns the SDK's client set to ctx; the caller holds mu.
func (c *Client) client(ctx context.Context) (*sdk.Client, error) {
	if c.c == nil {
		sc, err := sdk.NewClient(strings.TrimSuffix(c.cfg.BaseURL, "/"), sdk.SetHTTPClient(c.cfg.Client()),
			sdk.SetToken(c.cfg.Token), sdk.SetContext(ctx))
		if err != nil {
			return nil, &forge.Error{Kind: forge.Gitea, Op: "connect", Err: err}
		}
		c.c = sc
	}
	c.c.SetContext(ctx)
	return c.c, nil
}

// call runs fn with the client, one call at a time.
func (c *Client) call(ctx context.Context, fn func(*sdk.Client) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc, err := c.client(ctx)
	if err != nil {
		return err
	}
	return fn(sc)
}

func wrap(op string, resp *sdk.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &forge.Error{Kind: forge.Gitea, Op: op, Err: err}
	if resp != nil && resp.Response != nil {
		e.Status = resp.StatusCode
	}
	e.RateLimited = e.Status == http.StatusTooManyRequests
	return e
}

// DefaultBranch reads the repository's default branch.
func (c *Client) DefaultBranch(ctx context.Context, repo string) (string, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return "", err
	}
	var out string
	err = c.call(ctx, func(sc *sdk.Client) error {
		r, resp, err := sc.GetRepo(owner, name)
		if err != nil {
			return wrap("get repository", resp, err)
		}
		out = r.DefaultBranch
		return nil
	})
	return out, err
}

// FindPullRequest asks for the latest pull request from head into base
// (GET /repos/{owner}/{repo}/pulls/{base}/{head}); 404 means none.
func (c *Client) FindPullRequest(ctx context.Context, repo, head, base string) (*forge.PullRequest, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	var out *forge.PullRequest
	err = c.call(ctx, func(sc *sdk.Client) error {
		pr, resp, err := sc.GetPullRequestByBaseHead(owner, name, base, head)
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil
		}
		if err != nil {
			return wrap("find pull request", resp, err)
		}
		out = convert(pr)
		return nil
	})
	return out, err
}

func convert(p *sdk.PullRequest) *forge.PullRequest {
	st := forge.Open
	switch {
	case p.HasMerged:
		st = forge.Merged
	case p.State == sdk.StateClosed:
		st = forge.Closed
	}
	pr := &forge.PullRequest{Number: int(p.Index), URL: p.HTMLURL, State: st, Draft: p.Draft}
	if p.Head != nil {
		pr.Head, pr.HeadSHA = p.Head.Ref, p.Head.Sha
	}
	if p.Base != nil {
		pr.Base = p.Base.Ref
	}
	return pr
}

// CreatePullRequest opens a pull request with its assignees, reviewers
// and labels (found by name among the repository's). A label the
// repository does not have is left out: the pull request is opened, and
// returned with the error that says so.
func (c *Client) CreatePullRequest(ctx context.Context, repo string, p forge.Publication) (*forge.PullRequest, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	title := p.Title
	if p.Draft && !strings.HasPrefix(title, "WIP:") {
		title = "WIP: " + title
	}
	var out *forge.PullRequest
	var missing error
	err = c.call(ctx, func(sc *sdk.Client) error {
		labels, err := labelIDs(sc, owner, name, p.Labels)
		var fe *forge.Error
		if errors.As(err, &fe) && fe.Op == "find label" {
			missing, err = err, nil // opened without them, and said so
		}
		if err != nil {
			return err
		}
		pr, resp, err := sc.CreatePullRequest(owner, name, sdk.CreatePullRequestOption{Head: p.Head, Base: p.Base,
			Title: title, Body: p.Body, Assignees: p.Assignees, Reviewers: p.Reviewers, Labels: labels})
		if err != nil {
			return wrap("create pull request", resp, err)
		}
		out = convert(pr)
		return nil
	})
	if err == nil && missing != nil {
		return out, missing
	}
	return out, err
}

// labelIDs finds labels by name; the ids of those found, and an error
// naming those not.
func labelIDs(sc *sdk.Client, owner, name string, names []string) ([]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ls, resp, err := sc.ListRepoLabels(owner, name, sdk.ListLabelsOptions{ListOptions: sdk.ListOptions{PageSize: 50}})
	if err != nil {
		return nil, wrap("list labels", resp, err)
	}
	var ids []int64
	var missing []string
	for _, n := range names {
		i := slices.IndexFunc(ls, func(l *sdk.Label) bool { return l.Name == n })
		if i < 0 {
			missing = append(missing, n)
			continue
		}
		ids = append(ids, ls[i].ID)
	}
	if len(missing) > 0 {
		return ids, &forge.Error{Kind: forge.Gitea, Op: "find label", Status: http.StatusUnprocessableEntity,
			Err: fmt.Errorf("the repository has no label %.100q", missing)}
	}
	return ids, nil
}

// UpdatePullRequest sets the title and body.
func (c *Client) UpdatePullRequest(ctx context.Context, repo string, number int, p forge.Publication) (*forge.PullRequest, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	var out *forge.PullRequest
	err = c.call(ctx, func(sc *sdk.Client) error {
		pr, resp, err := sc.EditPullRequest(owner, name, int64(number), sdk.EditPullRequestOption{Title: p.Title, Body: &p.Body})
		if err != nil {
			return wrap("update pull request", resp, err)
		}
		out = convert(pr)
		return nil
	})
	return out, err
}

// PullRequest reads one pull request.
func (c *Client) PullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	var out *forge.PullRequest
	err = c.call(ctx, func(sc *sdk.Client) error {
		pr, resp, err := sc.GetPullRequest(owner, name, int64(number))
		if err != nil {
			return wrap("get pull request", resp, err)
		}
		out = convert(pr)
		return nil
	})
	return out, err
}

// maxPages bounds the pages one listing reads.
const maxPages = 10

// Comment adds an issue comment to the pull request, once per marker.
func (c *Client) Comment(ctx context.Context, repo string, number int, marker, body string) (string, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return "", err
	}
	var out string
	err = c.call(ctx, func(sc *sdk.Client) error {
		for page := 1; page <= maxPages && marker != ""; page++ {
			cs, resp, err := sc.ListIssueComments(owner, name, int64(number), sdk.ListIssueCommentOptions{
				ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
			if err != nil {
				return wrap("list comments", resp, err)
			}
			for _, cm := range cs {
				if strings.Contains(cm.Body, marker) {
					out = cm.HTMLURL
					return nil
				}
			}
			if len(cs) < 50 {
				break
			}
		}
		cm, resp, err := sc.CreateIssueComment(owner, name, int64(number), sdk.CreateIssueCommentOption{Body: body})
		if err != nil {
			return wrap("create comment", resp, err)
		}
		out = cm.HTMLURL
		return nil
	})
	return out, err
}

// Reviews lists the reviews, and the line comments of those that request
// changes and were not dismissed.
func (c *Client) Reviews(ctx context.Context, repo string, number int) ([]forge.Review, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	var out []forge.Review
	err = c.call(ctx, func(sc *sdk.Client) error {
		rs, resp, err := sc.ListPullReviews(owner, name, int64(number), sdk.ListPullReviewsOptions{
			ListOptions: sdk.ListOptions{PageSize: 50}})
		if err != nil {
			return wrap("list reviews", resp, err)
		}
		for _, r := range rs {
			rv := forge.Review{ID: strconv.FormatInt(r.ID, 10), Body: r.Body, URL: r.HTMLURL, CommitSHA: r.CommitID,
				State: forge.Commented}
			if r.Reviewer != nil {
				rv.Author = r.Reviewer.UserName
			}
			switch {
			case r.Dismissed:
			case r.State == sdk.ReviewStateRequestChanges:
				rv.State = forge.ChangesRequested
			case r.State == sdk.ReviewStateApproved:
				rv.State = forge.Approved
			}
			if rv.State == forge.ChangesRequested {
				cs, resp, err := sc.ListPullReviewComments(owner, name, int64(number), r.ID)
				if err != nil {
					return wrap("list review comments", resp, err)
				}
				for _, cm := range cs {
					line := int(cm.LineNum)
					if line == 0 {
						line = int(cm.OldLineNum)
					}
					k := forge.Comment{Path: cm.Path, Line: line, Body: cm.Body}
					if cm.Reviewer != nil {
						k.Author = cm.Reviewer.UserName
					}
					rv.Comments = append(rv.Comments, k)
				}
			}
			out = append(out, rv)
		}
		return nil
	})
	return out, err
}

// Checks are the head commit's statuses (Gitea Actions report theirs as
// statuses too).
func (c *Client) Checks(ctx context.Context, repo string, pr *forge.PullRequest) ([]forge.Check, error) {
	owner, name, err := forge.SplitRepo(repo)
	if err != nil {
		return nil, err
	}
	if pr.HeadSHA == "" {
		return nil, nil
	}
	var out []forge.Check
	err = c.call(ctx, func(sc *sdk.Client) error {
		st, resp, err := sc.GetCombinedStatus(owner, name, pr.HeadSHA)
		if err != nil {
			return wrap("get combined status", resp, err)
		}
		for _, s := range st.Statuses {
			ch := forge.Check{ID: strconv.FormatInt(s.ID, 10), Name: s.Context, Conclusion: string(s.State),
				Summary: s.Description, URL: s.TargetURL, Status: forge.CheckPending}
			switch s.State {
			case sdk.StatusSuccess, sdk.StatusWarning:
				ch.Status = forge.CheckPassed
			case sdk.StatusFailure, sdk.StatusError:
				ch.Status = forge.CheckFailed
			}
			out = append(out, ch)
		}
		return nil
	})
	return out, err
}
