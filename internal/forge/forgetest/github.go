package forgetest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/forge"
)

// github answers GitHub's REST paths (docs.github.com/rest: pulls,
// reviews, check runs, commit statuses, issue comments, labels,
// assignees), under /api/v3 as GitHub Enterprise serves them.
func (f *Fake) github(w http.ResponseWriter, r *http.Request) bool {
	rest, served, ok := f.repoPath(w, r, "/api/v3")
	if !ok {
		return served
	}
	m := r.Method
	switch {
	case len(rest) == 1 && rest[0] == "pulls" && m == http.MethodGet:
		f.ghListPulls(w, r)
	case len(rest) == 1 && rest[0] == "pulls" && m == http.MethodPost:
		f.ghCreatePull(w, r)
	case len(rest) == 3 && rest[0] == "commits" && rest[2] == "check-runs":
		f.ghCheckRuns(w, rest[1])
	case len(rest) == 3 && rest[0] == "commits" && rest[2] == "status":
		f.ghStatus(w, rest[1])
	case len(rest) >= 2 && (rest[0] == "pulls" || rest[0] == "issues"):
		n, _ := strconv.Atoi(rest[1])
		p := f.pr(n)
		if p == nil {
			return false
		}
		return f.ghPull(w, r, p, rest[0], rest[2:])
	default:
		return false
	}
	return true
}

func (f *Fake) ghPull(w http.ResponseWriter, r *http.Request, p *PR, kind string, rest []string) bool {
	m := r.Method
	var in struct {
		Title     *string  `json:"title"`
		Body      *string  `json:"body"`
		Reviewers []string `json:"reviewers"`
		Assignees []string `json:"assignees"`
	}
	switch {
	case kind == "pulls" && len(rest) == 0 && m == http.MethodGet:
	case kind == "pulls" && len(rest) == 0 && m == http.MethodPatch:
		if readJSON(r, &in) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
			return true
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Body != nil {
			p.Body = *in.Body
		}
	case kind == "issues" && len(rest) == 1 && rest[0] == "labels" && m == http.MethodPost:
		var labels []string
		if readJSON(r, &labels) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
			return true
		}
		p.Labels = append(p.Labels, labels...)
		out := []map[string]string{}
		for _, l := range p.Labels {
			out = append(out, map[string]string{"name": l})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	case kind == "pulls" && len(rest) == 1 && rest[0] == "requested_reviewers" && m == http.MethodPost:
		_ = readJSON(r, &in)
		p.Reviewers = append(p.Reviewers, in.Reviewers...)
		writeJSON(w, http.StatusCreated, f.ghPR(p))
		return true
	case kind == "issues" && len(rest) == 1 && rest[0] == "assignees" && m == http.MethodPost:
		_ = readJSON(r, &in)
		p.Assignees = append(p.Assignees, in.Assignees...)
		writeJSON(w, http.StatusCreated, f.ghPR(p))
		return true
	case kind == "issues" && len(rest) == 1 && rest[0] == "comments":
		f.ghComments(w, r, p)
		return true
	case kind == "pulls" && len(rest) == 1 && rest[0] == "reviews":
		out := []map[string]any{}
		for _, rv := range p.Reviews {
			id, _ := strconv.ParseInt(rv.ID, 10, 64)
			st := map[forge.ReviewState]string{forge.ChangesRequested: "CHANGES_REQUESTED", forge.Approved: "APPROVED"}[rv.State]
			if st == "" {
				st = "COMMENTED"
			}
			out = append(out, map[string]any{"id": id, "user": map[string]string{"login": rv.Author}, "body": rv.Body,
				"state": st, "html_url": rv.URL, "commit_id": rv.CommitSHA, "submitted_at": "2026-01-02T03:04:05Z"})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	case kind == "pulls" && len(rest) == 3 && rest[0] == "reviews" && rest[2] == "comments":
		out := []map[string]any{}
		for _, rv := range p.Reviews {
			if rv.ID != rest[1] {
				continue
			}
			for i, c := range rv.Comments {
				out = append(out, map[string]any{"id": i + 1, "path": c.Path, "line": c.Line, "original_line": c.Line,
					"body": c.Body, "user": map[string]string{"login": c.Author}})
			}
		}
		writeJSON(w, http.StatusOK, out)
		return true
	default:
		return false
	}
	writeJSON(w, http.StatusOK, f.ghPR(p))
	return true
}

func (f *Fake) ghPR(p *PR) map[string]any {
	state, merged := "open", p.State == forge.Merged
	if p.State != forge.Open {
		state = "closed"
	}
	return map[string]any{"number": p.Number, "html_url": p.URL, "state": state, "draft": p.Draft, "merged": merged,
		"title": p.Title, "body": p.Body,
		"head": map[string]string{"ref": p.Head, "sha": f.headSHA(p.Head)}, "base": map[string]string{"ref": p.Base}}
}

func (f *Fake) ghListPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	owner, _, _ := strings.Cut(f.Repo, "/")
	out := []map[string]any{}
	for i := len(f.prs) - 1; i >= 0; i-- { // newest first
		p := f.prs[i]
		if h := q.Get("head"); h != "" && h != owner+":"+p.Head {
			continue
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		if st := q.Get("state"); (st == "" || st == "open") && p.State != forge.Open {
			continue
		}
		out = append(out, f.ghPR(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) ghCreatePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if err := readJSON(r, &in); err != nil || in.Head == "" || in.Base == "" || in.Title == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return
	}
	if p := f.find(in.Head, in.Base); p != nil && p.State == forge.Open {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors": []map[string]string{{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + in.Head + "."}}})
		return
	}
	writeJSON(w, http.StatusCreated, f.ghPR(f.open(in.Head, in.Base, in.Title, in.Body, in.Draft)))
}

func (f *Fake) ghComments(w http.ResponseWriter, r *http.Request, p *PR) {
	if r.Method == http.MethodPost {
		var in struct{ Body string }
		if readJSON(r, &in) != nil || in.Body == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
			return
		}
		id := f.comment(p, in.Body)
		writeJSON(w, http.StatusCreated, map[string]any{"id": id, "body": in.Body,
			"html_url": p.URL + "#issuecomment-" + strconv.FormatInt(id, 10)})
		return
	}
	out := []map[string]any{}
	for i, c := range p.Comments {
		out = append(out, map[string]any{"id": i + 1, "body": c, "html_url": p.URL + "#issuecomment-" + strconv.Itoa(i+1)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) ghCheckRuns(w http.ResponseWriter, sha string) {
	runs := []map[string]any{}
	for _, c := range f.checks[sha] {
		if strings.HasPrefix(c.ID, "status-") {
			continue
		}
		id, _ := strconv.ParseInt(c.ID, 10, 64)
		run := map[string]any{"id": id, "name": c.Name, "head_sha": sha, "html_url": c.URL,
			"output": map[string]string{"title": c.Summary, "summary": "", "text": c.LogTail}}
		switch c.Status {
		case forge.CheckPending:
			run["status"] = "in_progress"
		case forge.CheckPassed:
			run["status"], run["conclusion"] = "completed", "success"
		default:
			run["status"], run["conclusion"] = "completed", orDefault(c.Conclusion, "failure")
		}
		runs = append(runs, run)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}

func (f *Fake) ghStatus(w http.ResponseWriter, sha string) {
	sts := []map[string]any{}
	state := "success"
	for _, c := range f.checks[sha] {
		if !strings.HasPrefix(c.ID, "status-") {
			continue
		}
		s := map[forge.CheckStatus]string{forge.CheckPending: "pending", forge.CheckPassed: "success"}[c.Status]
		if s == "" {
			s = orDefault(c.Conclusion, "failure")
		}
		if s != "success" {
			state = s
		}
		sts = append(sts, map[string]any{"state": s, "context": c.Name, "description": c.Summary, "target_url": c.URL})
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(sts), "statuses": sts})
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// GitHubWebhook is a delivery of event (pull_request_review, check_run,
// status) about pull request number, signed with secret as GitHub signs
// (X-Hub-Signature-256); an empty secret sends it unsigned.
func (f *Fake) GitHubWebhook(event, delivery string, number int, secret string) Webhook {
	f.mu.Lock()
	p := f.pr(number)
	head, sha := "", ""
	if p != nil {
		head, sha = p.Head, f.headSHA(p.Head)
	}
	f.mu.Unlock()
	repo := map[string]any{"full_name": f.Repo, "name": f.Repo[strings.IndexByte(f.Repo, '/')+1:]}
	pull := map[string]any{"number": number, "head": map[string]string{"ref": head, "sha": sha}}
	var body map[string]any
	switch event {
	case "check_run":
		body = map[string]any{"action": "completed", "repository": repo, "check_run": map[string]any{"id": 1, "head_sha": sha,
			"status": "completed", "conclusion": "failure", "pull_requests": []any{map[string]any{"number": number}},
			"check_suite": map[string]any{"head_branch": head}}}
	case "status":
		body = map[string]any{"sha": sha, "state": "failure", "repository": repo}
	default:
		body = map[string]any{"action": "submitted", "repository": repo, "pull_request": pull,
			"review": map[string]any{"id": 1, "state": "changes_requested"}}
	}
	raw, _ := json.Marshal(body)
	h := http.Header{"X-Github-Event": {event}, "X-Github-Delivery": {delivery}, "Content-Type": {"application/json"}}
	if secret != "" {
		h.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, raw))
	}
	return Webhook{Header: h, Body: raw}
}
