package forgetest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/forge"
)

// Fake is one forge serving one repository.
type Fake struct {
	Kind forge.Kind
	Repo string // owner/name (GitLab: namespace/name)
	// Token is the token the fake accepts; any other is answered 401.
	Token string
	// URL is where a client reaches it: Config.BaseURL.
	URL string

	srv *httptest.Server
	mu  sync.Mutex
	prs []*PR
	// checks are the checks of each commit.
	checks map[string][]forge.Check
	// traces are GitLab jobs' logs, by job id.
	traces map[string]string
	labels []string
	calls  []string
	// Default is the repository's default branch. Defaults to main.
	Default string
	// HeadSHA resolves a branch to its commit (the e2e test reads its git
	// repository); nil keeps what was set with SetHead.
	HeadSHA func(branch string) string
	heads   map[string]string
	nextID  int64
}

// PR is a pull request as the fake holds it.
type PR struct {
	forge.PullRequest
	Title, Body                  string
	Labels, Reviewers, Assignees []string
	Comments                     []string
	Reviews                      []forge.Review
}

// New starts a fake forge of kind k serving repo, stopped when the test ends.
func New(t testing.TB, k forge.Kind, repo, token string) *Fake {
	t.Helper()
	f := &Fake{Kind: k, Repo: repo, Token: token, checks: map[string][]forge.Check{}, traces: map[string]string{},
		heads: map[string]string{}, nextID: 1000, Default: "main"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/"
	return f
}

// Config is a client configuration for the fake.
func (f *Fake) Config() forge.Config {
	return forge.Config{Kind: f.Kind, BaseURL: f.URL, Token: f.Token}
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	if f.Kind == forge.Gitea && strings.TrimSuffix(r.URL.Path, "/") == "/api/v1/version" {
		writeJSON(w, http.StatusOK, map[string]string{"version": "1.22.0"})
		return
	}
	if !f.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	var ok bool
	switch f.Kind {
	case forge.GitHub:
		ok = f.github(w, r)
	case forge.GitLab:
		ok = f.gitlab(w, r)
	case forge.Gitea:
		ok = f.gitea(w, r)
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

func (f *Fake) authorized(r *http.Request) bool {
	switch f.Kind {
	case forge.GitHub:
		return r.Header.Get("Authorization") == "Bearer "+f.Token
	case forge.GitLab:
		return r.Header.Get("Private-Token") == f.Token
	default:
		return r.Header.Get("Authorization") == "token "+f.Token
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Calls returns "METHOD path" of every request served so far.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// PRs returns copies of the pull requests, by number.
func (f *Fake) PRs() []PR {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]PR, len(f.prs))
	for i, p := range f.prs {
		out[i] = *p
		out[i].PullRequest.HeadSHA = f.headSHA(p.Head)
		out[i].Comments = slices.Clone(p.Comments)
	}
	return out
}

// SetHead sets the commit a branch is at (unless HeadSHA resolves it).
func (f *Fake) SetHead(branch, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heads[branch] = sha
}

func (f *Fake) headSHA(branch string) string {
	if f.HeadSHA != nil {
		return f.HeadSHA(branch)
	}
	return f.heads[branch]
}

// AddReview adds a review to pull request number (its ID is given if
// empty) and returns it.
func (f *Fake) AddReview(number int, rv forge.Review) forge.Review {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rv.ID == "" {
		f.nextID++
		rv.ID = fmt.Sprint(f.nextID)
	}
	p := f.pr(number)
	if p == nil {
		panic(fmt.Sprintf("forgetest: no pull request %d", number))
	}
	p.Reviews = append(p.Reviews, rv)
	return rv
}

// SetChecks sets the checks of a commit; a check without an ID is given one.
func (f *Fake) SetChecks(sha string, checks ...forge.Check) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range checks {
		if checks[i].ID == "" {
			f.nextID++
			checks[i].ID = fmt.Sprint(f.nextID)
		}
		f.traces[checks[i].ID] = checks[i].LogTail
	}
	f.checks[sha] = checks
}

// SetLabels sets the labels the repository has (Gitea finds them by name).
func (f *Fake) SetLabels(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels = names
}

// SetState closes or merges a pull request.
func (f *Fake) SetState(number int, st forge.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pr(number).State = st
}

// pr returns pull request number; the caller holds mu.
func (f *Fake) pr(number int) *PR {
	if number < 1 || number > len(f.prs) {
		return nil
	}
	return f.prs[number-1]
}

// open records a new pull request; the caller holds mu.
func (f *Fake) open(head, base, title, body string, draft bool) *PR {
	p := &PR{PullRequest: forge.PullRequest{Number: len(f.prs) + 1, State: forge.Open, Head: head, Base: base, Draft: draft},
		Title: title, Body: body}
	p.URL = fmt.Sprintf("%s%s/pull/%d", f.URL, f.Repo, p.Number)
	f.prs = append(f.prs, p)
	return p
}

// find returns the latest pull request from head into base; the caller
// holds mu.
func (f *Fake) find(head, base string) *PR {
	for i := len(f.prs) - 1; i >= 0; i-- {
		if p := f.prs[i]; p.Head == head && (base == "" || p.Base == base) {
			return p
		}
	}
	return nil
}

// comment records a comment and returns its id; the caller holds mu.
func (f *Fake) comment(p *PR, body string) int64 {
	p.Comments = append(p.Comments, body)
	return int64(len(p.Comments))
}

// Webhook is a delivery the fake sends: Post it to the controller.
type Webhook struct {
	Header http.Header
	Body   []byte
}

// Post sends the delivery to url and returns the status it got.
func (h Webhook) Post(url string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(h.Body))
	if err != nil {
		return 0, err
	}
	req.Header = h.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// hmacHex is the hex HMAC-SHA256 of body with secret, as GitHub and Gitea
// sign their deliveries.
func hmacHex(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// segments splits an escaped path into its unescaped segments.
// repoPath routes a request under prefix to the fake's repository, as
// GitHub and Gitea name it (repos/OWNER/NAME/...): it answers the
// repository itself (served), and returns the path's segments past it
// (ok) or refuses another repository's.
func (f *Fake) repoPath(w http.ResponseWriter, r *http.Request, prefix string) (rest []string, served, ok bool) {
	seg := segments(strings.TrimPrefix(r.URL.EscapedPath(), prefix))
	if len(seg) == 3 && seg[0] == "repos" && seg[1]+"/"+seg[2] == f.Repo && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]any{"full_name": f.Repo, "default_branch": f.Default})
		return nil, true, false
	}
	if len(seg) < 4 || seg[0] != "repos" || seg[1]+"/"+seg[2] != f.Repo {
		return nil, false, false
	}
	return seg[3:], false, true
}

func segments(p string) []string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range parts {
		if u, err := url.PathUnescape(s); err == nil {
			parts[i] = u
		}
	}
	return parts
}
