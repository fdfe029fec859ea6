package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
)

// Forge is a code forge the controller publishes flows to and follows
// (docs/forges.md), named once under forges: and by that name in a flow's
// publish section.
type Forge struct {
	// Type is github, gitlab or gitea (Forgejo is gitea).
	Type string `mapstructure:"type"`
	// BaseURL is the forge's API: empty for github.com and gitlab.com;
	// GitHub Enterprise's https://ghe.example.com/api/v3/; the root of a
	// GitLab or Gitea instance (required for Gitea). Defaults to empty.
	BaseURL string `mapstructure:"base_url"`
	// TokenEnv names the controller's environment variable holding the
	// token. Only the controller reads it; workers never get it.
	TokenEnv string `mapstructure:"token_env"`
	// WebhookSecretEnv names the controller's variable holding the secret
	// the forge signs its webhooks with; empty: webhooks from this forge
	// are refused and the controller polls. Defaults to empty.
	WebhookSecretEnv string `mapstructure:"webhook_secret_env"`
}

// Kind is the forge's type.
func (f Forge) Kind() forge.Kind { return forge.Kind(f.Type) }

// validateForges checks each forge, and each project's publish section
// with a flow's rules.
func (c *Config) validateForges(p *problems) {
	for name, f := range c.Forges {
		key := "forges." + name
		if err := drovertype.ValidID(name); err != nil {
			p.add(key, "forge name: %v", err)
		}
		if _, err := forge.ParseKind(f.Type); err != nil {
			p.add(key+".type", "must be github, gitlab or gitea (got %q)", f.Type)
		}
		switch u, err := url.Parse(f.BaseURL); {
		case f.BaseURL == "" && f.Kind() == forge.Gitea:
			p.add(key+".base_url", "is required for gitea: the instance's root URL, like https://gitea.example.com/")
		case f.BaseURL == "":
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add(key+".base_url", "must be an http or https URL (got %q)", f.BaseURL)
		case u.User != nil:
			p.add(key+".base_url", "must not carry credentials; name the token's variable in token_env")
		}
		if !envNameRE.MatchString(f.TokenEnv) {
			p.add(key+".token_env", "must name the controller's environment variable that holds the token (got %q)", f.TokenEnv)
		}
		if f.WebhookSecretEnv != "" && !envNameRE.MatchString(f.WebhookSecretEnv) {
			p.add(key+".webhook_secret_env", "must be an environment variable's name (got %q)", f.WebhookSecretEnv)
		}
	}
	if c.Console.URL != "" {
		if u, err := url.Parse(c.Console.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			p.add("console.url", "must be an http or https URL without credentials (got %q)", c.Console.URL)
		}
	}
	for _, name := range c.ProjectNames() {
		if _, err := c.ProjectPublish(name); err != nil {
			p.add("projects."+name+".publish", "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
}

// ProjectPublish is a project's publish section, read with a flow's rules
// (flow.DecodePublishJSON); nil when it has none. Forges it names must be
// configured.
func (c *Config) ProjectPublish(name string) (*flow.Publish, error) {
	raw := c.Projects[name].Publish
	if raw == nil {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	pub, err := flow.DecodePublishJSON(b, "projects."+name+".publish")
	if err != nil {
		return nil, err
	}
	if pr := pub.PullRequest; pr != nil && pr.Forge != "" {
		if _, ok := c.Forges[pr.Forge]; !ok {
			return nil, fmt.Errorf("pull_request.forge: %q is not a configured forge (forges: %s)", pr.Forge, strings.Join(c.ForgeNames(), ", "))
		}
	}
	return pub, nil
}

// ForgeNames returns the configured forges' names, sorted.
func (c *Config) ForgeNames() []string {
	names := make([]string, 0, len(c.Forges))
	for n := range c.Forges {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
