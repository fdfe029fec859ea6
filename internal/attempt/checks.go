package attempt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/verify"
)

// errCancelled is the stop cause of a CLI or a check stopped because the
// job's Cancel channel closed.
var errCancelled = errors.New("attempt: cancelled")

// Bounds of what the report carries of the checks.
const (
	maxViolations         = 100
	maxViolationsInReport = 10
)

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// cancelOn returns a context that is also cancelled, with errCancelled,
// when ch closes. stop releases the watcher and waits for it.
func cancelOn(ctx context.Context, ch <-chan struct{}) (_ context.Context, stop func()) {
	c, cancel := context.WithCancelCause(ctx)
	if ch == nil {
		return c, func() { cancel(nil) }
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ch:
			cancel(errCancelled)
		case <-quit:
		}
	}()
	return c, func() {
		close(quit)
		<-done
		cancel(nil)
	}
}

func hasChecks(job *Job) bool {
	return len(job.Verify) > 0 || job.Review != nil || job.Scope != nil
}

func capStrings(l []string, n int) []string {
	if len(l) > n {
		return l[:n]
	}
	return l
}

// cancelledError is the failure of a cancelled attempt, saying what the
// cancel said.
func cancelledError(job *Job) *adapter.Error {
	msg := "cancelled"
	if job.CancelReason != nil {
		if r := job.CancelReason(); r != "" {
			msg = r
		}
	}
	return &adapter.Error{Class: drovertype.ClassCancelled, Category: "operator", Message: msg}
}

// scopeError is the failure for violations, listing the first few.
func scopeError(violations []string, runErr *adapter.Error) *adapter.Error {
	msg := fmt.Sprintf("%d change(s) outside what the task may change: %s", len(violations),
		strings.Join(capStrings(violations, maxViolationsInReport), "; "))
	if n := len(violations) - maxViolationsInReport; n > 0 {
		msg += fmt.Sprintf("; and %d more", n)
	}
	if runErr != nil {
		msg += " (the runtime also failed: " + runErr.Error() + ")"
	}
	return &adapter.Error{Class: drovertype.ClassScopeViolation, Category: drovertype.CategoryRuntime, Message: msg}
}

// runChecks runs the verification commands and then, if they passed, the
// review, in the worktree. env is the CLI's sanitised environment. It
// returns what they found and, for a failed check, the attempt's error.
// A cancelled ctx is the caller's to detect.
// box confines the commands as it confined the CLI.
func (r *Runner) runChecks(ctx context.Context, job *Job, wt *checkout.Checkout, tmp string, env []string, diff string, box *confined) (*event.Verification, *adapter.Error) {
	timeout := time.Duration(job.VerifyTimeout)
	if timeout <= 0 {
		timeout = verify.DefaultTimeout
	}
	v := &event.Verification{Passed: true}
	if len(job.Verify) > 0 {
		v.Commands = verify.Run(ctx, verify.Spec{Dir: wt.Path, Commands: job.Verify, Timeout: timeout, Env: env, Launch: box.launch()})
		for i := range v.Commands {
			v.Commands[i].Output = r.Redact.String(v.Commands[i].Output)
		}
		if !verify.Passed(v.Commands) {
			v.Passed = false
			return v, &adapter.Error{Class: drovertype.ClassVerificationFailed, Category: drovertype.CategoryRuntime, Recoverable: true,
				Message: verify.Describe(v.Commands[len(v.Commands)-1])}
		}
	}
	if job.Review == nil || ctx.Err() != nil {
		return v, nil
	}
	rv := r.review(ctx, job, wt, tmp, diff, v.Commands, timeout)
	v.Review = rv
	name := rv.Runtime
	switch {
	case rv.Error != "":
		v.Passed = false
		return v, &adapter.Error{Class: drovertype.ClassVerificationFailed, Category: drovertype.CategoryRuntime, Recoverable: true,
			Message: fmt.Sprintf("review by %s: %s", name, rv.Error)}
	case !rv.Passed:
		v.Passed = false
		msg := fmt.Sprintf("review by %s: FAIL", name)
		if len(rv.Reasons) > 0 {
			msg += ": " + rv.Reasons[0]
		}
		return v, &adapter.Error{Class: drovertype.ClassVerificationFailed, Category: drovertype.CategoryRuntime, Recoverable: true, Message: msg}
	}
	return v, nil
}

// review runs the validator runtime on the attempt's result, in the same
// worktree, confined as the attempt's runtime is, and reads its verdict.
func (r *Runner) review(ctx context.Context, job *Job, wt *checkout.Checkout, tmp, diff string, checks []event.CommandResult, timeout time.Duration) *event.ReviewResult {
	rv, validator := job.Review, job.Validator
	res := &event.ReviewResult{Runtime: rv.Runtime}
	if res.Runtime == "" && validator != nil {
		res.Runtime = validator.Name()
	}
	if validator == nil {
		res.Error = "no validator runtime"
		return res
	}
	if _, err := validator.Initialize(ctx); err != nil {
		res.Error = "the validator cannot run: " + err.Error()
		return res
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		res.Error = "the validator cannot run: " + err.Error()
		return res
	}
	defer os.RemoveAll(tmp)
	task := rv.Task
	if task == "" {
		task = job.Prompt
	}
	asked := false
	t := &adapter.Task{
		Input: adapter.Input{
			Prompt: ReviewPrompt(task, diff, checks), Worktree: wt.Path, TempDir: tmp,
			Model: rv.Model, Args: rv.Args, Timeout: timeout,
			Env: []string{
				"DROVER_FLOW_ID=" + job.Flow, "DROVER_TASK_ID=" + job.Task,
				"DROVER_ATTEMPT_ID=" + job.Attempt, "DROVER_WORKTREE=" + wt.Path, "DROVER_ROLE=validator",
			},
		},
		// A review changes nothing: a runtime whose tools check the scope
		// refuses every change; what any other writes is undone with the
		// rest of the checks', and the guard asked again.
		Scope: &flow.Scope{Deny: []string{"**"}},
		Confine: func(n adapter.Needs) (adapter.Confiner, error) {
			asked = true
			box, err := r.confine(n, wt, tmp)
			if err != nil {
				return nil, err
			}
			return box.confiner(), nil
		},
	}
	reader := newOutputReader(validator)
	t.Output = reader.tee(nil)
	h, err := validator.Start(ctx, t)
	if err == nil && !asked {
		h.Stop(errUnconfined)
		h.Wait()
		err = errUnconfined
	}
	if err != nil {
		res.Error = "the validator cannot run: " + err.Error()
		return res
	}
	exit := reader.waitStopping(h)
	sum := reader.summary(exit.ExitCode)
	text := exit.FinalText
	if sum != nil {
		text = sum.FinalText
	}
	if strings.TrimSpace(text) == "" {
		text = exit.Stdout
	}
	if e := validator.Classify(exit, sum); e != nil {
		res.Error = "the validator failed: " + e.Error()
		return res
	}
	r.verdict(text, res)
	return res
}

// verdict reads the validator's answer into res.
func (r *Runner) verdict(text string, res *event.ReviewResult) {
	passed, reasons, err := ParseVerdict(text)
	if err != nil {
		res.Error = err.Error()
		return
	}
	for i := range reasons {
		reasons[i] = r.Redact.String(reasons[i])
	}
	res.Passed, res.Reasons = passed, reasons
}

// reviewTempDir is the validator's private temp dir beside the attempt's.
func reviewTempDir(tmp string) string {
	return filepath.Join(filepath.Dir(tmp), filepath.Base(tmp)+"-review")
}
