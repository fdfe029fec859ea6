// Package gitlab is Drover's forge.Forge for GitLab (gitlab.com or a
// self-managed instance), on GitLab's client-go
// (gitlab.com/gitlab-org/api/client-go): merge requests, the reviewers that
// requested changes and their unresolved notes, the head commit's
// pipeline and its failed jobs' logs, notes, and webhook deliveries
// carrying X-Gitlab-Token.
//
// It must not know flows or events; it is the only package that imports
// client-go.
package gitlab
