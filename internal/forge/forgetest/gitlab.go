package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/forge"
)

// gitlab answers GitLab's REST paths (docs.gitlab.com/api: merge requests,
// their reviewers, discussions, pipelines and notes; pipeline jobs and job
// traces; users), under /api/v4, the project named by its URL-encoded path.
func (f *Fake) gitlab(w http.ResponseWriter, r *http.Request) bool {
	seg := segments(strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4"))
	if len(seg) == 1 && seg[0] == "users" {
		name := r.URL.Query().Get("username")
		writeJSON(w, http.StatusOK, []map[string]any{{"id": f.userID(name), "username": name}})
		return true
	}
	if len(seg) == 2 && seg[0] == "projects" && seg[1] == f.Repo && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]any{"id": 7, "path_with_namespace": f.Repo, "default_branch": f.Default})
		return true
	}
	if len(seg) < 3 || seg[0] != "projects" || seg[1] != f.Repo {
		return false
	}
	rest, m := seg[2:], r.Method
	switch {
	case len(rest) == 1 && rest[0] == "merge_requests" && m == http.MethodGet:
		f.glListMRs(w, r)
	case len(rest) == 1 && rest[0] == "merge_requests" && m == http.MethodPost:
		f.glCreateMR(w, r)
	case len(rest) == 3 && rest[0] == "pipelines" && rest[2] == "jobs":
		f.glJobs(w, rest[1])
	case len(rest) == 3 && rest[0] == "jobs" && rest[2] == "trace":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(f.traces[rest[1]]))
	case len(rest) >= 2 && rest[0] == "merge_requests":
		n, _ := strconv.Atoi(rest[1])
		p := f.pr(n)
		if p == nil {
			return false
		}
		return f.glMR(w, r, p, rest[2:])
	default:
		return false
	}
	return true
}

// userID gives each username a stable id (FNV-1a).
func (f *Fake) userID(name string) int { return int(crc(name)%100000) + 1 }

func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func (f *Fake) glMR(w http.ResponseWriter, r *http.Request, p *PR, rest []string) bool {
	m := r.Method
	switch {
	case len(rest) == 0 && m == http.MethodGet:
	case len(rest) == 0 && m == http.MethodPut:
		var in struct {
			Title       *string `json:"title"`
			Description *string `json:"description"`
		}
		if readJSON(r, &in) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "400 Bad request"})
			return true
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Description != nil {
			p.Body = *in.Description
		}
	case len(rest) == 1 && rest[0] == "reviewers":
		writeJSON(w, http.StatusOK, f.glReviewers(p))
		return true
	case len(rest) == 1 && rest[0] == "discussions":
		writeJSON(w, http.StatusOK, f.glDiscussions(p))
		return true
	case len(rest) == 1 && rest[0] == "pipelines":
		sha := f.headSHA(p.Head)
		out := []map[string]any{}
		if cs, ok := f.checks[sha]; ok {
			out = append(out, map[string]any{"id": crc(sha) % 100000, "sha": sha, "ref": p.Head, "status": pipelineStatus(cs),
				"web_url": f.URL + "pipelines/" + sha})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	case len(rest) == 1 && rest[0] == "notes" && m == http.MethodPost:
		var in struct{ Body string }
		if readJSON(r, &in) != nil || in.Body == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "400 Bad request"})
			return true
		}
		writeJSON(w, http.StatusCreated, map[string]any{"id": f.comment(p, in.Body), "body": in.Body})
		return true
	case len(rest) == 1 && rest[0] == "notes":
		out := []map[string]any{}
		for i, c := range p.Comments {
			out = append(out, map[string]any{"id": i + 1, "body": c, "system": false})
		}
		writeJSON(w, http.StatusOK, out)
		return true
	default:
		return false
	}
	writeJSON(w, http.StatusOK, f.glMRJSON(p))
	return true
}

func (f *Fake) glMRJSON(p *PR) map[string]any {
	state := map[forge.State]string{forge.Open: "opened", forge.Closed: "closed", forge.Merged: "merged"}[p.State]
	return map[string]any{"id": p.Number + 100, "iid": p.Number, "project_id": 7, "title": p.Title, "description": p.Body,
		"state": state, "source_branch": p.Head, "target_branch": p.Base, "sha": f.headSHA(p.Head), "web_url": p.URL,
		"draft": strings.HasPrefix(p.Title, "Draft:"), "labels": p.Labels}
}

func (f *Fake) glListMRs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []map[string]any{}
	for i := len(f.prs) - 1; i >= 0; i-- {
		p := f.prs[i]
		if s := q.Get("source_branch"); s != "" && s != p.Head {
			continue
		}
		if t := q.Get("target_branch"); t != "" && t != p.Base {
			continue
		}
		if st := q.Get("state"); st == "opened" && p.State != forge.Open {
			continue
		}
		out = append(out, f.glMRJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *Fake) glCreateMR(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title        string  `json:"title"`
		Description  string  `json:"description"`
		SourceBranch string  `json:"source_branch"`
		TargetBranch string  `json:"target_branch"`
		Labels       string  `json:"labels"`
		ReviewerIDs  []int64 `json:"reviewer_ids"`
		AssigneeIDs  []int64 `json:"assignee_ids"`
	}
	if err := readJSON(r, &in); err != nil || in.Title == "" || in.SourceBranch == "" || in.TargetBranch == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "400 Bad request - title, source_branch, target_branch are missing"})
		return
	}
	if p := f.find(in.SourceBranch, in.TargetBranch); p != nil && p.State == forge.Open {
		writeJSON(w, http.StatusConflict, map[string]any{"message": []string{"Another open merge request already exists for this source branch: !" + strconv.Itoa(p.Number)}})
		return
	}
	p := f.open(in.SourceBranch, in.TargetBranch, in.Title, in.Description, strings.HasPrefix(in.Title, "Draft:"))
	p.URL = fmt.Sprintf("%s%s/-/merge_requests/%d", f.URL, f.Repo, p.Number)
	if in.Labels != "" {
		p.Labels = strings.Split(in.Labels, ",")
	}
	for _, id := range in.ReviewerIDs {
		p.Reviewers = append(p.Reviewers, strconv.FormatInt(id, 10))
	}
	for _, id := range in.AssigneeIDs {
		p.Assignees = append(p.Assignees, strconv.FormatInt(id, 10))
	}
	writeJSON(w, http.StatusCreated, f.glMRJSON(p))
}

// glReviewers are the pull request's reviews as GitLab's reviewers: one
// per author, in the state of their latest review.
func (f *Fake) glReviewers(p *PR) []map[string]any {
	var names []string
	state := map[string]string{}
	for _, rv := range p.Reviews {
		if !slices.Contains(names, rv.Author) {
			names = append(names, rv.Author)
		}
		state[rv.Author] = map[forge.ReviewState]string{forge.ChangesRequested: "requested_changes", forge.Approved: "approved"}[rv.State]
		if state[rv.Author] == "" {
			state[rv.Author] = "reviewed"
		}
	}
	out := []map[string]any{}
	for _, n := range names {
		out = append(out, map[string]any{"user": map[string]any{"id": f.userID(n), "username": n}, "state": state[n],
			"created_at": "2026-01-02T03:04:05Z"})
	}
	return out
}

// glDiscussions are the reviews' comments as unresolved diff notes.
func (f *Fake) glDiscussions(p *PR) []map[string]any {
	out := []map[string]any{}
	id := 0
	for _, rv := range p.Reviews {
		for _, c := range rv.Comments {
			id++
			note := map[string]any{"id": id, "body": c.Body, "author": map[string]any{"id": f.userID(rv.Author), "username": rv.Author},
				"system": false, "resolvable": true, "resolved": false}
			if c.Path != "" {
				note["position"] = map[string]any{"position_type": "text", "new_path": c.Path, "new_line": c.Line}
			}
			out = append(out, map[string]any{"id": fmt.Sprintf("d%d", id), "individual_note": false, "notes": []any{note}})
		}
	}
	return out
}

func pipelineStatus(cs []forge.Check) string {
	st := "success"
	for _, c := range cs {
		switch c.Status {
		case forge.CheckFailed:
			return "failed"
		case forge.CheckPending:
			st = "running"
		}
	}
	return st
}

func (f *Fake) glJobs(w http.ResponseWriter, pipeline string) {
	out := []map[string]any{}
	for sha, cs := range f.checks {
		if strconv.FormatUint(uint64(crc(sha)%100000), 10) != pipeline {
			continue
		}
		for _, c := range cs {
			id, _ := strconv.ParseInt(c.ID, 10, 64)
			st := map[forge.CheckStatus]string{forge.CheckPending: "running", forge.CheckPassed: "success"}[c.Status]
			if st == "" {
				st = orDefault(c.Conclusion, "failed")
			}
			out = append(out, map[string]any{"id": id, "name": c.Name, "status": st, "stage": "test",
				"failure_reason": c.Summary, "web_url": c.URL, "allow_failure": false})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// GitLabWebhook is a delivery of event ("Merge Request Hook", "Pipeline
// Hook", "Note Hook") about merge request number, carrying secret as
// X-Gitlab-Token as GitLab sends it; an empty secret sends none.
func (f *Fake) GitLabWebhook(event, delivery string, number int, secret string) Webhook {
	f.mu.Lock()
	p := f.pr(number)
	head, sha := "", ""
	if p != nil {
		head, sha = p.Head, f.headSHA(p.Head)
	}
	f.mu.Unlock()
	project := map[string]any{"id": 7, "path_with_namespace": f.Repo}
	var body map[string]any
	switch event {
	case "Pipeline Hook":
		body = map[string]any{"object_kind": "pipeline", "project": project,
			"object_attributes": map[string]any{"id": 1, "ref": head, "sha": sha, "status": "failed"},
			"merge_request":     map[string]any{"iid": number, "source_branch": head}}
	case "Note Hook":
		body = map[string]any{"object_kind": "note", "project": project,
			"object_attributes": map[string]any{"id": 1, "noteable_type": "MergeRequest", "note": "please fix"},
			"merge_request":     map[string]any{"iid": number, "source_branch": head, "last_commit": map[string]any{"id": sha}}}
	default:
		body = map[string]any{"object_kind": "merge_request", "project": project,
			"object_attributes": map[string]any{"iid": number, "source_branch": head, "last_commit": map[string]any{"id": sha}}}
	}
	raw, _ := json.Marshal(body)
	h := http.Header{"X-Gitlab-Event": {event}, "X-Gitlab-Event-Uuid": {delivery}, "Content-Type": {"application/json"}}
	if secret != "" {
		h.Set("X-Gitlab-Token", secret)
	}
	return Webhook{Header: h, Body: raw}
}
