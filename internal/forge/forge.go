package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kind is the type of a forge, as config names it.
type Kind string

// The forges Drover speaks to.
const (
	GitHub Kind = "github" // github.com, or GitHub Enterprise through its base URL
	GitLab Kind = "gitlab" // gitlab.com or a self-managed instance
	Gitea  Kind = "gitea"  // Gitea or Forgejo
)

// Kinds lists every kind, for messages.
var Kinds = []Kind{GitHub, GitLab, Gitea}

// ParseKind reads a kind as config writes it.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("forge: unknown type %.40q (known: github, gitlab, gitea)", s)
}

// Config is what opening a forge client needs.
type Config struct {
	Kind Kind
	// BaseURL is the forge's API (GitHub Enterprise:
	// https://ghe.example.com/api/v3/) or, for GitLab and Gitea, the
	// instance's root; empty means the public service (github.com,
	// gitlab.com; Gitea has none and needs one).
	BaseURL string
	// Token authenticates every call; it never appears in an error.
	Token string
	// HTTPClient carries the calls. Defaults to a client whose transport
	// gives up on a forge that sends no response headers within 30 s;
	// callers bound each call with their context.
	HTTPClient *http.Client
}

// Client returns the HTTP client to use: HTTPClient, or the default. The
// default has no Timeout of its own: net/http keeps a goroutine per
// request for one until it fires when a response body is replaced before
// it is closed (go-github does, on an error), so deadlines come from the
// caller's context instead.
func (c Config) Client() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}

// State is a pull request's state.
type State string

// Pull request states.
const (
	Open   State = "open"
	Closed State = "closed" // closed without being merged
	Merged State = "merged"
)

// PullRequest is a pull request (GitLab: a merge request) as the forge
// reports it.
type PullRequest struct {
	Number  int    `json:"number"` // GitLab: the merge request's iid
	URL     string `json:"url"`    // the page a person opens
	State   State  `json:"state"`
	Draft   bool   `json:"draft,omitempty"`
	Head    string `json:"head"`     // the branch it merges
	Base    string `json:"base"`     // the branch it merges into
	HeadSHA string `json:"head_sha"` // the head branch's commit the forge knows
}

// Publication is what a pull request should say and be.
type Publication struct {
	Head, Base  string
	Title, Body string
	// Draft opens it as a draft (GitLab: "Draft: " in the title; Gitea:
	// "WIP: "). Only a new pull request is made a draft.
	Draft bool
	// Labels, Reviewers and Assignees are added when the pull request is
	// opened: names as the forge knows them (GitHub and Gitea logins,
	// GitLab usernames; labels by name).
	Labels, Reviewers, Assignees []string
}

// ReviewState is what a review concluded.
type ReviewState string

// Review states.
const (
	ChangesRequested ReviewState = "changes_requested"
	Approved         ReviewState = "approved"
	Commented        ReviewState = "commented"
)

// Review is one review of a pull request.
type Review struct {
	// ID names the review at the forge, stable across reads: GitHub's and
	// Gitea's review id; on GitLab the reviewer and their latest note.
	ID        string      `json:"id"`
	Author    string      `json:"author,omitempty"`
	State     ReviewState `json:"state"`
	Body      string      `json:"body,omitempty"`
	URL       string      `json:"url,omitempty"`
	CommitSHA string      `json:"commit_sha,omitempty"`
	Comments  []Comment   `json:"comments,omitempty"`
}

// Comment is a review comment on a line of a file.
type Comment struct {
	Path   string `json:"path,omitempty"`
	Line   int    `json:"line,omitempty"` // in the file as the pull request changes it; 0 when the forge gives none
	Body   string `json:"body"`
	Author string `json:"author,omitempty"`
}

// CheckStatus is where a check stands.
type CheckStatus string

// Check statuses.
const (
	CheckPending CheckStatus = "pending"
	CheckPassed  CheckStatus = "passed"
	CheckFailed  CheckStatus = "failed"
)

// Check is one check of the pull request's head commit: a GitHub check run
// or commit status, a GitLab pipeline's job, a Gitea commit status.
type Check struct {
	// ID names the check at the forge; with the head commit it names
	// one run of it.
	ID     string      `json:"id"`
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	// Conclusion is the forge's own word (failure, timed_out, failed, error).
	Conclusion string `json:"conclusion,omitempty"`
	// Summary is what the check said of itself; LogTail the end of its log
	// where the forge gives one (GitLab's job trace, GitHub's output text).
	Summary string `json:"summary,omitempty"`
	LogTail string `json:"log_tail,omitempty"`
	URL     string `json:"url,omitempty"`
}

// Publisher opens and updates pull requests and comments on them.
type Publisher interface {
	// DefaultBranch is the repository's default branch, what a pull
	// request merges into when nothing says otherwise.
	DefaultBranch(ctx context.Context, repo string) (string, error)
	// FindPullRequest returns the latest pull request from head into base,
	// in any state, or nil when there is none.
	FindPullRequest(ctx context.Context, repo, head, base string) (*PullRequest, error)
	// CreatePullRequest opens one.
	CreatePullRequest(ctx context.Context, repo string, p Publication) (*PullRequest, error)
	// UpdatePullRequest sets its title and body.
	UpdatePullRequest(ctx context.Context, repo string, number int, p Publication) (*PullRequest, error)
	// Comment adds a comment unless one holding marker is there already,
	// and returns the comment's URL (or id).
	Comment(ctx context.Context, repo string, number int, marker, body string) (string, error)
}

// Follower reads a pull request and what was said about it.
type Follower interface {
	PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error)
	// Reviews returns its reviews, each with its line comments.
	Reviews(ctx context.Context, repo string, number int) ([]Review, error)
	// Checks returns the checks of its head commit (pr.HeadSHA).
	Checks(ctx context.Context, repo string, pr *PullRequest) ([]Check, error)
}

// Forge is a forge client in both roles.
type Forge interface {
	Publisher
	Follower
}

// SplitRepo splits "owner/name" (GitHub, Gitea) into its two parts.
func SplitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("forge: repository %.200q is not OWNER/NAME", repo)
	}
	return owner, name, nil
}

// Tail returns at most max bytes of the end of s, cut at a line start when
// one is near, for log tails.
func Tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < max/4 {
		s = s[i+1:]
	}
	return strings.ToValidUTF8(s, "")
}
