package config

import (
	"errors"
	"strings"
	"testing"
)

func TestForges(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{File: writeFile(t, `
forges:
  acme-github:
    type: github
    token_env: GITHUB_TOKEN
  corp:
    type: gitlab
    base_url: https://gitlab.corp.example/
    token_env: CORP_GITLAB_TOKEN
    webhook_secret_env: CORP_HOOK_SECRET
projects:
  web:
    repo: https://github.com/acme/web.git
    publish:
      pull_request: {forge: acme-github, labels: [drover], draft: true}
      iterate: {on: [checks_failed], max_rounds: 3}
`)})
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Forges["corp"]; f.Type != "gitlab" || f.BaseURL != "https://gitlab.corp.example/" || f.TokenEnv != "CORP_GITLAB_TOKEN" || f.WebhookSecretEnv != "CORP_HOOK_SECRET" {
		t.Fatalf("forges.corp = %+v", f)
	}
	pub, err := c.ProjectPublish("web")
	if err != nil {
		t.Fatal(err)
	}
	if pub.PullRequest.Forge != "acme-github" || !*pub.PullRequest.Draft || pub.Iterate.MaxRounds != 3 || pub.Iterate.On[0] != "checks_failed" {
		t.Fatalf("projects.web.publish = %+v %+v", pub.PullRequest, pub.Iterate)
	}
	if got := strings.Join(c.ForgeNames(), ","); got != "acme-github,corp" {
		t.Fatalf("ForgeNames = %s", got)
	}
}

func TestInvalidForges(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"type":           {"forges:\n  f:\n    type: bitbucket\n    token_env: T\n", "forges.f.type"},
		"gitea base":     {"forges:\n  f:\n    type: gitea\n    token_env: T\n", "forges.f.base_url: is required for gitea"},
		"base_url":       {"forges:\n  f:\n    type: github\n    base_url: ftp://x\n    token_env: T\n", "forges.f.base_url: must be an http or https URL"},
		"credentials":    {"forges:\n  f:\n    type: github\n    base_url: https://u:p@ghe.example/\n    token_env: T\n", "must not carry credentials"},
		"token_env":      {"forges:\n  f:\n    type: github\n", "forges.f.token_env"},
		"token_env name": {"forges:\n  f:\n    type: github\n    token_env: GITHUB-TOKEN\n", "forges.f.token_env"},
		"secret env":     {"forges:\n  f:\n    type: github\n    token_env: T\n    webhook_secret_env: 'a b'\n", "forges.f.webhook_secret_env"},
		"name":           {"forges:\n  my_forge:\n    type: github\n    token_env: T\n", "forges.my_forge: forge name"},
		"unknown field":  {"forges:\n  f:\n    type: github\n    token: abc\n", "token"},
		"project publish": {"projects:\n  web:\n    publish:\n      iterate: {max_rounds: 100}\n",
			"projects.web.publish.iterate.max_rounds: 100 is out of range"},
		"project forge": {"projects:\n  web:\n    publish:\n      pull_request: {forge: nosuch}\n",
			`projects.web.publish: pull_request.forge: "nosuch" is not a configured forge`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}
