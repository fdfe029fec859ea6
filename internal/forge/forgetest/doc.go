// Package forgetest is test support for forges: a fake GitHub, GitLab and
// Gitea on loopback (httptest) that answer the paths and shapes of each
// forge's documented REST API for what Drover calls — pull requests (merge
// requests) created, updated and looked up by head, reviews and their line
// comments, check runs, pipelines and jobs with their traces, commit
// statuses, comments — checks the token, and sends webhook deliveries
// signed as each forge signs them.
//
// Production code must not import it.
package forgetest
