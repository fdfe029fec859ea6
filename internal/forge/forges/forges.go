// Package forges opens a forge client, and finds the webhook reader, by
// the forge's kind: the one place that knows every forge subpackage, so
// that the controller imports none of them.
//
// It must not know what the forges are used for.
package forges

import (
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/gitea"
	"github.com/drover-dev/drover/internal/forge/github"
	"github.com/drover-dev/drover/internal/forge/gitlab"
)

// Open returns a client of the forge cfg names.
func Open(cfg forge.Config) (forge.Forge, error) {
	switch cfg.Kind {
	case forge.GitHub:
		return github.New(cfg)
	case forge.GitLab:
		return gitlab.New(cfg)
	case forge.Gitea:
		return gitea.New(cfg)
	}
	_, err := forge.ParseKind(string(cfg.Kind))
	return nil, err
}

// Hook returns the webhook reader of a kind of forge, nil for an unknown one.
func Hook(k forge.Kind) forge.Hook {
	switch k {
	case forge.GitHub:
		return github.Hook{}
	case forge.GitLab:
		return gitlab.Hook{}
	case forge.Gitea:
		return gitea.Hook{}
	}
	return nil
}
