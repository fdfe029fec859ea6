// Package gitea is Drover's forge.Forge for Gitea and Forgejo, on Gitea's
// Go SDK (code.gitea.io/sdk/gitea): pull requests, reviews and their line
// comments, the head commit's statuses, comments, and webhook deliveries
// signed with X-Gitea-Signature (Forgejo also sends X-Forgejo-Signature,
// the same HMAC).
//
// It must not know flows or events; it is the only package that imports
// the Gitea SDK.
package gitea
