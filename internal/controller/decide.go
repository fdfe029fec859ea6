package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/eventlog"
	"github.com/drover-dev/drover/internal/queue"
)

// action is one decision to carry out: an event to record, or a job to queue.
type action struct {
	event *eventlog.Event
	job   *queue.Job
}

// decide computes every action the folded state calls for and carries them
// out. Event ids are deterministic, so deciding the same thing twice (before
// the first decision is folded, or after a restart) records it once.
func (c *Controller) decide(ctx context.Context) error {
	var actions []action
	var err error
	c.store.Read(func(st *eventlog.State) {
		actions, err = c.plan(st)
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range actions {
		if a.event != nil {
			if _, err := queue.PublishEvent(ctx, c.js, a.event); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := queue.PublishJob(ctx, c.js, a.job); err != nil {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		c.published[a.job.Attempt] = true
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// plan is the decision function: folded state in, actions out. It reads the
// clock only to stamp the events it creates.
func (c *Controller) plan(st *eventlog.State) ([]action, error) {
	var out []action
	now := c.now()
	add := func(id string, typ eventlog.Type, flowID, task, attempt string, data any) error {
		ev, err := eventlog.New(id, typ, now, flowID, task, attempt, 0, data)
		if err != nil {
			return err
		}
		out = append(out, action{event: ev})
		return nil
	}
	for _, f := range st.Flows {
		if f.State.Terminal() {
			continue
		}
		tasks := st.FlowTasks(f)
		done, ok := 0, true
		for _, t := range tasks {
			if t.State.Terminal() {
				done++
				ok = ok && t.State == eventlog.TaskSucceeded
			}
		}
		if done == len(tasks) {
			state := eventlog.FlowSucceeded
			if !ok {
				state = eventlog.FlowFailed
			}
			if err := add("flow_completed:"+f.ID, eventlog.FlowCompleted, f.ID, "", "", eventlog.FlowCompletedData{State: state}); err != nil {
				return nil, err
			}
			continue
		}
		for _, t := range tasks {
			switch t.State {
			case eventlog.TaskPending:
				if merge, ready := readyMerge(st, f, t); ready {
					if err := c.schedule(add, f, t, merge); err != nil {
						return nil, err
					}
				}
			case eventlog.TaskScheduled, eventlog.TaskRunning:
				a := st.Attempts[t.Attempt]
				if a == nil {
					continue
				}
				switch {
				case a.State == eventlog.AttemptQueued:
					c.mu.Lock()
					queued := c.published[a.ID]
					c.mu.Unlock()
					if !queued {
						out = append(out, action{job: c.job(f, t, a)})
					}
				case a.State == eventlog.AttemptFailed && a.Error == nil:
					info := eventlog.ErrorInfo{Class: "UNKNOWN", Message: "attempt failed without an error"}
					if a.Report != nil && a.Report.Error != nil {
						info = *a.Report.Error
					}
					if err := add("runtime_error_classified:"+a.ID, eventlog.RuntimeErrorClassified, f.ID, t.ID, a.ID,
						eventlog.RuntimeErrorClassifiedData{ErrorInfo: info}); err != nil {
						return nil, err
					}
				case a.State == eventlog.AttemptFailed:
					// Retry and fallback policy decides here once it exists;
					// until then every failure is final.
					reason := fmt.Sprintf("attempt %d failed: %s: %s", a.N, a.Error.Class, a.Error.Message)
					if err := add("task_failed:"+a.ID, eventlog.TaskFailedEvent, f.ID, t.ID, a.ID,
						eventlog.TaskFailedData{Reason: reason, Class: a.Error.Class}); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

// readyMerge reports whether every dependency of t succeeded, and their
// results in the order t lists them.
func readyMerge(st *eventlog.State, f *eventlog.Flow, t *eventlog.Task) ([]eventlog.DepResult, bool) {
	merge := make([]eventlog.DepResult, 0, len(t.DependsOn))
	for _, dep := range t.DependsOn {
		d := st.Task(f.ID, dep)
		if d == nil || d.State != eventlog.TaskSucceeded {
			return nil, false
		}
		merge = append(merge, eventlog.DepResult{Task: dep, Branch: d.ResultBranch, Commit: d.ResultCommit})
	}
	return merge, true
}

func (c *Controller) schedule(add func(string, eventlog.Type, string, string, string, any) error, f *eventlog.Flow, t *eventlog.Task, merge []eventlog.DepResult) error {
	n := t.Attempts + 1
	id := queue.AttemptID(f.ID, t.ID, n)
	spec, _ := f.Spec.Task(t.ID)
	timeout := f.Spec.Timeout
	if spec != nil && spec.Timeout > 0 {
		timeout = spec.Timeout
	}
	return add("attempt_scheduled:"+id, eventlog.AttemptScheduled, f.ID, t.ID, id, eventlog.AttemptScheduledData{
		N: n, Runtime: t.Runtime, Pool: c.cfg.Defaults.Pool, Branch: queue.AttemptBranch(f.ID, t.ID, n),
		Timeout: timeout, Merge: merge,
	})
}

func (c *Controller) job(f *eventlog.Flow, t *eventlog.Task, a *eventlog.Attempt) *queue.Job {
	spec, _ := f.Spec.Task(t.ID)
	prompt := ""
	if spec != nil {
		prompt = spec.Prompt
	}
	return &queue.Job{
		Attempt: a.ID, Flow: f.ID, Task: t.ID, N: a.N, Pool: a.Pool, Runtime: a.Runtime,
		Repo: f.Spec.Repo, Base: f.Spec.Base, Branch: a.Branch, Prompt: prompt,
		Timeout: a.Timeout, Merge: a.Merge,
	}
}
