package controller

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/policy"
)

// resolvePublish is what a flow is published with: its publish section
// over its project's, the forge and the repository inferred from the
// flow's repo URL where they are not given, and the defaults filled in.
// nil when neither says anything.
func resolvePublish(cfg *config.Config, spec *flow.Spec, repoURL string) (*flow.Publish, error) {
	var project *flow.Publish
	if spec.Project != "" {
		var err error
		if project, err = cfg.ProjectPublish(spec.Project); err != nil {
			return nil, fmt.Errorf("projects.%s.publish: %w", spec.Project, err)
		}
	}
	pub := flow.MergePublish(spec.Publish, project)
	if pub == nil {
		return nil, nil
	}
	pr := pub.PullRequest
	if pr == nil {
		return nil, fmt.Errorf("publish.iterate: it follows a pull request, and publish.pull_request is not set")
	}
	host, path := forgeRepoOf(repoURL)
	if pr.Forge == "" {
		name, err := inferForge(cfg, host)
		if err != nil {
			return nil, err
		}
		pr.Forge = name
	}
	if _, ok := cfg.Forges[pr.Forge]; !ok {
		return nil, fmt.Errorf("publish.pull_request.forge: %q is not a configured forge (forges: %s)", pr.Forge,
			strings.Join(cfg.ForgeNames(), ", "))
	}
	if pr.Repo == "" {
		if flow.ValidForgeRepo(path) != nil {
			return nil, fmt.Errorf("publish.pull_request.repo: not given, and the flow's repo %.200q names none at a forge: set it (OWNER/NAME)", repoURL)
		}
		pr.Repo = path
	}
	if pr.Base == "" && branchLike(spec.Base) {
		pr.Base = spec.Base
	}
	if pr.Title == "" {
		pr.Title = spec.Name
	}
	if pr.On == "" {
		pr.On = flow.PublishOnSuccess
	}
	if it := pub.Iterate; it != nil {
		if len(it.On) == 0 {
			it.On = []string{flow.IterateChangesRequested, flow.IterateChecksFailed}
		}
		if it.MaxRounds == 0 {
			it.MaxRounds = flow.DefaultMaxRounds
		}
		if it.PollInterval == 0 {
			it.PollInterval = flow.DefaultPollInterval
		}
		if it.Split == "" {
			it.Split = flow.SplitRound
		}
	}
	if err := pub.Validate(); err != nil {
		return nil, err
	}
	return pub, nil
}

// roundPlan is how a round's tasks run: as a task of the flow that names
// nothing of its own would.
func roundPlan(cfg *config.Config, flowLayer, project, global policy.Layer) (*policy.Resolved, error) {
	r := policy.Resolve(policy.Layer{Level: policy.LevelTask}, flowLayer, project, global)
	if r.Worker.Name == "" {
		return nil, fmt.Errorf("publish.iterate: a round's task has no runtime: set one on the flow, its project, or defaults.runtime")
	}
	if _, ok := cfg.Runtimes[r.Worker.Name]; !ok {
		return nil, fmt.Errorf("publish.iterate: a round's runtime %q is not configured", r.Worker.Name)
	}
	return &r, nil
}

// shaRE is a commit id, which is no branch a pull request can merge into.
var shaRE = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// branchLike reports whether a flow's base names a branch: not HEAD, a
// tag's ref or a commit id.
func branchLike(base string) bool {
	return base != "" && base != flow.DefaultBase && !strings.HasPrefix(base, "refs/tags/") && !shaRE.MatchString(base)
}

// forgeRepoOf reads a git URL's host and repository path
// (https://github.com/acme/app.git, git@github.com:acme/app.git,
// ssh://git@host:22/group/sub/app): "" and "" for a local path.
func forgeRepoOf(repo string) (host, path string) {
	if u, err := url.Parse(repo); err == nil && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if at := strings.Index(repo, "@"); at >= 0 && strings.Contains(repo[at:], ":") && !strings.HasPrefix(repo, "/") {
		rest := repo[at+1:]
		host, path, _ = strings.Cut(rest, ":")
	} else {
		return "", ""
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	return strings.ToLower(host), path
}

// forgeHost is the host whose repositories a configured forge serves.
func forgeHost(f config.Forge) string {
	if f.BaseURL == "" {
		switch f.Kind() {
		case forge.GitHub:
			return "github.com"
		case forge.GitLab:
			return "gitlab.com"
		}
		return ""
	}
	u, err := url.Parse(f.BaseURL)
	if err != nil {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if f.Kind() == forge.GitHub {
		h = strings.TrimPrefix(h, "api.") // api.github.com serves github.com
	}
	return h
}

// inferForge is the one configured forge serving host.
func inferForge(cfg *config.Config, host string) (string, error) {
	var found []string
	for _, name := range cfg.ForgeNames() {
		if h := forgeHost(cfg.Forges[name]); h != "" && h == host {
			found = append(found, name)
		}
	}
	switch {
	case host == "":
		return "", fmt.Errorf("publish.pull_request.forge: not given, and the flow's repo is not at a forge's URL: name one (forges: %s)",
			strings.Join(cfg.ForgeNames(), ", "))
	case len(found) == 0:
		return "", fmt.Errorf("publish.pull_request.forge: not given, and no configured forge serves %s (forges: %s)", host,
			strings.Join(cfg.ForgeNames(), ", "))
	case len(found) > 1:
		return "", fmt.Errorf("publish.pull_request.forge: not given, and %s is served by %s: name one", host, strings.Join(found, " and "))
	}
	return found[0], nil
}
