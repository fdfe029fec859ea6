package attempt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/drovertype"
)

// Integrate builds a flow's integration branch: the flow's base with every
// succeeded task's result merged in job.Merge's order (dependencies first),
// pushed as job.Branch. No CLI runs. A merge conflict or a failed push is a
// result (FlowIntegratedData.Error), not an error; an error means the worker
// could not finish (ctx ended) and the job goes back.
func (r *Runner) Integrate(ctx context.Context, job *Job) (*event.FlowIntegratedData, error) {
	res := &event.FlowIntegratedData{N: job.N, Branch: job.Branch}
	fail := func(class drovertype.ErrorClass, msg string) (*event.FlowIntegratedData, error) {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		res.Error = &event.ErrorInfo{Class: class, Category: drovertype.CategoryInput, Message: msg}
		return res, nil
	}
	wtPath := filepath.Join(r.WorkDir, worktreesDir, fmt.Sprintf("%s-e%d", job.Attempt, job.Epoch))
	defer r.use(wtPath)()
	if err := os.MkdirAll(filepath.Dir(wtPath), 0o755); err != nil {
		return nil, fmt.Errorf("attempt: %w", err)
	}
	_ = os.RemoveAll(wtPath)
	tasks := map[string]string{} // branch -> task, for messages
	for _, m := range job.Merge {
		tasks[m.Branch] = m.Task
	}
	if err := r.checkRepo(job.Repo); err != nil {
		return fail(prepareFailure(err).Class, err.Error())
	}
	wt, err := r.Checkouts.Prepare(ctx, checkout.PrepareOptions{
		RepoURL: job.Repo, Base: job.Base, Branch: job.Branch, Path: wtPath, Merge: mergeRefs(job.Merge), NoAgent: true,
	})
	if err != nil {
		var mc *checkout.MergeConflictError
		if errors.As(err, &mc) {
			return fail(drovertype.ClassMergeConflict, fmt.Sprintf("merging task %s (%s) conflicts in %s",
				tasks[mc.Branch], mc.Branch, strings.Join(mc.Paths, ", ")))
		}
		return fail(prepareFailure(err).Class, err.Error())
	}
	defer func() {
		// No CLI ran in it: the cache may keep the checkout.
		if err := r.Checkouts.Release(context.WithoutCancel(ctx), wt); err != nil {
			r.Logger.Warn("remove integration worktree", "err", err)
		}
	}()
	sha, err := wt.Push(ctx)
	if err != nil {
		return fail(drovertype.ClassObserveFailed, err.Error())
	}
	res.Commit = sha
	return res, nil
}
