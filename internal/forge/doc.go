// Package forge is Drover's one view of a code forge — GitHub (and GitHub
// Enterprise), GitLab, Gitea and Forgejo — for publishing a flow as a pull
// request and following it: the pull request and its shape (PullRequest,
// Publication), the reviews and checks that may send the agent back
// (Review, Check), and the webhooks a forge sends about them (Delivery).
// Forge is the small interface the controller calls, in two roles:
// Publisher opens, updates and comments; Follower reads.
//
// Each forge is a subpackage that wraps the forge's maintained Go client
// (forge/github: go-github; forge/gitlab: GitLab's client-go; forge/gitea:
// Gitea's SDK), and forge/forges opens one by its kind. The vendor SDKs stay
// in those subpackages: nothing else in Drover imports them.
//
// It must not know flows, events or the projection: the controller decides
// what to publish and when, and records what a forge answered.
package forge
