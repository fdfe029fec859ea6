package worker

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/repocache"
)

// newCheckouts makes the worker's repo cache, in its work dir's repos/,
// and the checkouts made from it, keeping idle released ones for reuse;
// both run git as internal/git hardens it. With a sandbox, git in an
// agent's repository runs confined.
func newCheckouts(cfg *config.Config, log *slog.Logger, sbs sandboxState, idle int) (*checkout.Checkouts, error) {
	g, err := git.New(git.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cache, err := repocache.New(repocache.Options{Dir: filepath.Join(cfg.Worker.WorkDir, "repos"), Git: g, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	opts := checkout.Options{IdleCheckouts: idle, Logger: log}
	if sbs.sb != nil {
		opts.Confine = gitConfine(sbs.sb, cfg.SandboxDeny())
	}
	return checkout.New(cache, opts), nil
}
