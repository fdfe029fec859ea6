// Package github is Drover's forge.Forge for GitHub and GitHub Enterprise,
// on go-github (github.com/google/go-github): pull requests, their reviews
// and review comments, the head commit's check runs and commit statuses,
// comments, and webhook deliveries signed with X-Hub-Signature-256.
//
// It must not know flows or events; it is the only package that imports
// go-github.
package github
