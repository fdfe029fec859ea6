package attempt

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/repocache"
)

// prepareFailure classifies a failed Prepare: a repository or a base that
// does not exist will not exist on the next try either (REPO_NOT_FOUND,
// BASE_NOT_FOUND, not retried by the built-in policy); anything else —
// the network, the disk, a dependency's result not visible yet — may pass
// (PREPARE_FAILED, retried).
func prepareFailure(err error) *adapter.Error {
	switch {
	case errors.Is(err, repocache.ErrRepoNotFound):
		return &adapter.Error{Class: drovertype.ClassRepoNotFound, Category: drovertype.CategoryInput, Message: err.Error()}
	case errors.Is(err, repocache.ErrBaseNotFound):
		return &adapter.Error{Class: drovertype.ClassBaseNotFound, Category: drovertype.CategoryInput, Message: err.Error()}
	}
	return &adapter.Error{Class: drovertype.ClassPrepareFailed, Category: drovertype.CategoryInfrastructure, Message: err.Error(), Recoverable: true}
}

// checkRepo refuses a local repository inside the worker's work dir: its
// repo caches, the worktrees of other attempts (of any flow) and their temp
// dirs. A flow naming one would have the worker fetch another attempt's
// work and push into the worker's own caches. Local repositories elsewhere
// are a feature (one-host setups); a fleet that must not reach the workers'
// disks refuses them with GIT_ALLOW_PROTOCOL (docs/security.md).
func (r *Runner) checkRepo(repo string) error {
	dir, ok := repocache.LocalPath(repo)
	if !ok {
		return nil
	}
	work := filepath.Clean(r.WorkDir)
	if real, err := filepath.EvalSymlinks(work); err == nil {
		work = real
	}
	rel, err := filepath.Rel(work, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	return fmt.Errorf("attempt: repository %s is inside the worker's work dir %s; a flow cannot point a worker at its own caches and worktrees", repo, r.WorkDir)
}
