package forgetest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/forge"
)

// gitea answers Gitea's REST paths (its swagger, /api/v1: pulls, the pull
// from base and head, reviews and their comments, commit statuses, labels,
// issue comments).
func (f *Fake) gitea(w http.ResponseWriter, r *http.Request) bool {
	rest, served, ok := f.repoPath(w, r, "/api/v1")
	if !ok {
		return served
	}
	m := r.Method
	switch {
	case len(rest) == 1 && rest[0] == "labels":
		out := []map[string]any{}
		for i, l := range f.labels {
			out = append(out, map[string]any{"id": i + 1, "name": l})
		}
		writeJSON(w, http.StatusOK, out)
	case len(rest) == 1 && rest[0] == "pulls" && m == http.MethodPost:
		f.gtCreatePull(w, r)
	case len(rest) == 3 && rest[0] == "commits" && rest[2] == "status":
		f.gtStatus(w, rest[1])
	case len(rest) >= 3 && rest[0] == "pulls" && !isNumber(rest[1]):
		// GET /repos/{owner}/{repo}/pulls/{base}/{head}: head is the rest.
		p := f.find(strings.Join(rest[2:], "/"), rest[1])
		if p == nil {
			return false
		}
		writeJSON(w, http.StatusOK, f.gtPR(p))
	case len(rest) >= 2 && (rest[0] == "pulls" || rest[0] == "issues"):
		n, _ := strconv.Atoi(rest[1])
		p := f.pr(n)
		if p == nil {
			return false
		}
		return f.gtPull(w, r, p, rest[0], rest[2:])
	default:
		return false
	}
	return true
}

func isNumber(s string) bool { _, err := strconv.Atoi(s); return err == nil }

func (f *Fake) gtPR(p *PR) map[string]any {
	state := "open"
	if p.State != forge.Open {
		state = "closed"
	}
	return map[string]any{"id": p.Number + 100, "number": p.Number, "title": p.Title, "body": p.Body, "state": state,
		"draft": strings.HasPrefix(p.Title, "WIP:"), "merged": p.State == forge.Merged, "html_url": p.URL,
		"head": map[string]string{"ref": p.Head, "sha": f.headSHA(p.Head)}, "base": map[string]string{"ref": p.Base}}
}

func (f *Fake) gtCreatePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Head, Base, Title, Body string
		Assignees, Reviewers    []string
		Labels                  []int64
	}
	if err := readJSON(r, &in); err != nil || in.Head == "" || in.Base == "" || in.Title == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "[Head]: Required"})
		return
	}
	if p := f.find(in.Head, in.Base); p != nil && p.State == forge.Open {
		writeJSON(w, http.StatusConflict, map[string]string{"message": "pull request already exists for these targets"})
		return
	}
	p := f.open(in.Head, in.Base, in.Title, in.Body, strings.HasPrefix(in.Title, "WIP:"))
	p.Assignees, p.Reviewers = in.Assignees, in.Reviewers
	for _, id := range in.Labels {
		if id >= 1 && int(id) <= len(f.labels) {
			p.Labels = append(p.Labels, f.labels[id-1])
		}
	}
	writeJSON(w, http.StatusCreated, f.gtPR(p))
}

func (f *Fake) gtPull(w http.ResponseWriter, r *http.Request, p *PR, kind string, rest []string) bool {
	m := r.Method
	switch {
	case kind == "pulls" && len(rest) == 0 && m == http.MethodGet:
	case kind == "pulls" && len(rest) == 0 && m == http.MethodPatch:
		var in struct {
			Title string  `json:"title"`
			Body  *string `json:"body"`
		}
		if readJSON(r, &in) != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "invalid body"})
			return true
		}
		if in.Title != "" {
			p.Title = in.Title
		}
		if in.Body != nil {
			p.Body = *in.Body
		}
		writeJSON(w, http.StatusCreated, f.gtPR(p))
		return true
	case kind == "issues" && len(rest) == 1 && rest[0] == "comments" && m == http.MethodPost:
		var in struct{ Body string }
		if readJSON(r, &in) != nil || in.Body == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "[Body]: Required"})
			return true
		}
		id := f.comment(p, in.Body)
		writeJSON(w, http.StatusCreated, map[string]any{"id": id, "body": in.Body, "html_url": p.URL + "#issuecomment-" + strconv.FormatInt(id, 10)})
		return true
	case kind == "issues" && len(rest) == 1 && rest[0] == "comments":
		out := []map[string]any{}
		for i, c := range p.Comments {
			out = append(out, map[string]any{"id": i + 1, "body": c, "html_url": p.URL + "#issuecomment-" + strconv.Itoa(i+1)})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	case kind == "pulls" && len(rest) == 1 && rest[0] == "reviews":
		out := []map[string]any{}
		for _, rv := range p.Reviews {
			id, _ := strconv.ParseInt(rv.ID, 10, 64)
			st := map[forge.ReviewState]string{forge.ChangesRequested: "REQUEST_CHANGES", forge.Approved: "APPROVED"}[rv.State]
			if st == "" {
				st = "COMMENT"
			}
			out = append(out, map[string]any{"id": id, "user": map[string]any{"id": crc(rv.Author) % 1000, "login": rv.Author},
				"state": st, "body": rv.Body, "commit_id": rv.CommitSHA, "stale": false, "dismissed": false,
				"comments_count": len(rv.Comments), "html_url": rv.URL, "submitted_at": "2026-01-02T03:04:05Z"})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	case kind == "pulls" && len(rest) == 3 && rest[0] == "reviews" && rest[2] == "comments":
		out := []map[string]any{}
		for _, rv := range p.Reviews {
			if rv.ID != rest[1] {
				continue
			}
			id, _ := strconv.ParseInt(rv.ID, 10, 64)
			for i, c := range rv.Comments {
				out = append(out, map[string]any{"id": i + 1, "body": c.Body, "user": map[string]any{"login": c.Author},
					"path": c.Path, "position": c.Line, "original_position": 0, "pull_request_review_id": id})
			}
		}
		writeJSON(w, http.StatusOK, out)
		return true
	default:
		return false
	}
	writeJSON(w, http.StatusOK, f.gtPR(p))
	return true
}

func (f *Fake) gtStatus(w http.ResponseWriter, sha string) {
	sts := []map[string]any{}
	state := "success"
	for _, c := range f.checks[sha] {
		id, _ := strconv.ParseInt(c.ID, 10, 64)
		s := map[forge.CheckStatus]string{forge.CheckPending: "pending", forge.CheckPassed: "success"}[c.Status]
		if s == "" {
			s = orDefault(c.Conclusion, "failure")
		}
		if s != "success" {
			state = s
		}
		sts = append(sts, map[string]any{"id": id, "status": s, "context": c.Name, "description": c.Summary, "target_url": c.URL})
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(sts), "statuses": sts})
}

// GiteaWebhook is a delivery of event (pull_request_review_rejected,
// status, pull_request) about pull request number, signed with secret as
// Gitea signs (X-Gitea-Signature); an empty secret sends it unsigned.
func (f *Fake) GiteaWebhook(event, delivery string, number int, secret string) Webhook {
	f.mu.Lock()
	p := f.pr(number)
	head, sha := "", ""
	if p != nil {
		head, sha = p.Head, f.headSHA(p.Head)
	}
	f.mu.Unlock()
	repo := map[string]any{"id": 7, "full_name": f.Repo}
	var body map[string]any
	switch event {
	case "status":
		body = map[string]any{"sha": sha, "state": "failure", "context": "ci", "repository": repo}
	default:
		body = map[string]any{"action": "reviewed", "number": number, "repository": repo,
			"pull_request": map[string]any{"number": number, "head": map[string]string{"ref": head, "sha": sha}},
			"review":       map[string]any{"type": event, "content": "please fix"}}
	}
	raw, _ := json.Marshal(body)
	h := http.Header{"X-Gitea-Event": {event}, "X-Gitea-Delivery": {delivery}, "Content-Type": {"application/json"}}
	if secret != "" {
		h.Set("X-Gitea-Signature", hmacHex(secret, raw))
	}
	return Webhook{Header: h, Body: raw}
}
