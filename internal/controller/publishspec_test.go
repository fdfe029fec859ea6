package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/flow"
)

func forgeConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestResolvePublish: the forge and the repository are read from the
// flow's repo URL where not given; a project's publish section is under
// the flow's; the defaults are filled in; what cannot be resolved is
// refused with the field at fault.
func TestResolvePublish(t *testing.T) {
	cfg := forgeConfig(t, `
forges:
  gh: {type: github, token_env: GH_TOKEN}
  corp: {type: gitlab, base_url: "https://gitlab.corp.example/", token_env: CORP_TOKEN}
  ghe: {type: github, base_url: "https://ghe.example.com/api/v3/", token_env: GHE_TOKEN}
projects:
  web:
    repo: git@gitlab.corp.example:group/sub/web.git
    publish:
      pull_request: {labels: [drover]}
      iterate: {max_rounds: 4}
`)
	spec := func(repo, base string, pub *flow.Publish) *flow.Spec {
		return &flow.Spec{Name: "f", Repo: repo, Base: base, Runtime: "demo", Tasks: []flow.Task{{ID: "a", Prompt: "p"}}, Publish: pub}
	}
	res, err := Resolve(cfg, spec("https://github.com/acme/app.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{}}))
	if err != nil {
		t.Fatal(err)
	}
	pr := res.Publish.PullRequest
	if pr.Forge != "gh" || pr.Repo != "acme/app" || pr.Base != "main" || pr.Title != "f" || pr.On != flow.PublishOnSuccess || res.RoundPlan == nil {
		t.Fatalf("resolved %+v, round plan %v", pr, res.RoundPlan)
	}
	res, err = Resolve(cfg, spec("ssh://git@ghe.example.com/team/tool", "HEAD", &flow.Publish{PullRequest: &flow.PullRequestSpec{}}))
	if err != nil || res.Publish.PullRequest.Forge != "ghe" || res.Publish.PullRequest.Repo != "team/tool" || res.Publish.PullRequest.Base != "" {
		t.Fatalf("GitHub Enterprise: %+v, %v", res.Publish, err)
	}
	s := spec("", "main", &flow.Publish{Iterate: &flow.IterateSpec{Split: flow.SplitFile}})
	s.Project = "web"
	res, err = Resolve(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Publish; p.PullRequest.Forge != "corp" || p.PullRequest.Repo != "group/sub/web" || p.PullRequest.Labels[0] != "drover" ||
		p.Iterate.MaxRounds != 4 || p.Iterate.Split != flow.SplitFile || len(p.Iterate.On) != 2 || p.Iterate.PollInterval != flow.DefaultPollInterval {
		t.Fatalf("project's under the flow's: %+v %+v", p.PullRequest, p.Iterate)
	}
	if res, err := Resolve(cfg, spec("https://github.com/acme/app.git", "main", nil)); err != nil || res.Publish != nil || res.RoundPlan != nil {
		t.Fatalf("no publish section: %+v, %v", res, err)
	}
	for name, tc := range map[string]struct {
		spec *flow.Spec
		want string
	}{
		"local repo":    {spec("/srv/app.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{}}), "publish.pull_request.forge: not given"},
		"unknown host":  {spec("https://bitbucket.org/a/b.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{}}), "no configured forge serves bitbucket.org"},
		"unknown forge": {spec("/srv/app.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{Forge: "nosuch", Repo: "a/b"}}), `"nosuch" is not a configured forge`},
		"no repo":       {spec("/srv/app.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{Forge: "gh"}}), "publish.pull_request.repo: not given"},
		"iterate alone": {spec("https://github.com/acme/app.git", "main", &flow.Publish{Iterate: &flow.IterateSpec{}}), "publish.pull_request is not set"},
	} {
		if _, err := Resolve(cfg, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
	two := forgeConfig(t, "forges:\n  a: {type: github, token_env: A}\n  b: {type: github, token_env: B}\n")
	if _, err := Resolve(two, spec("https://github.com/acme/app.git", "main", &flow.Publish{PullRequest: &flow.PullRequestSpec{}})); err == nil ||
		!strings.Contains(err.Error(), "github.com is served by a and b: name one") {
		t.Errorf("two forges on one host: %v", err)
	}
}
