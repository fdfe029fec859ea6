package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
	"github.com/drover-dev/drover/internal/policy/feedback"
	"github.com/drover-dev/drover/internal/queue"
)

// action is one decision to carry out: an event to record, a job to queue,
// an attempt to stop, or a queued attempt to take back before it runs.
type action struct {
	event    *event.Event
	job      *jobSpec
	stop     *projection.Attempt
	withdraw *projection.Attempt
	// unplace is a queued attempt no worker took for its placement
	// timeout, taken back as a withdraw is; unplaced is what its event says.
	unplace  *projection.Attempt
	unplaced event.AttemptUnplacedData
	reason   string // why a stop, withdraw or unplace, for the event it records
}

// decide computes every action the folded state calls for and carries them
// out. Event ids are deterministic, so deciding the same thing twice (before
// the first decision is folded, or after a restart) records it once. It
// returns how long computing the actions took.
func (c *Controller) decide(ctx context.Context) (time.Duration, error) {
	lt, err := c.leading()
	if err != nil {
		return 0, nil // a standby decides nothing
	}
	var actions []action
	var folded uint64
	began := time.Now()
	c.store.ReadApplied(func(st *projection.State, applied uint64) {
		actions, err = c.decisions(st)
		// Exactly what the decisions were made from, never more: a
		// decision's copy stored and folded after this read (made last
		// round, folded meanwhile) would otherwise look like another
		// writer's message under its id, and be stored again under the
		// impostor's (queue.PublishDecision).
		folded = applied
	})
	walk := time.Since(began)
	if err != nil {
		return walk, err
	}
	// The decisions are independent of each other: published as one batch
	// (a round may be 10,000 of them), in order, awaited together. One that
	// fails is decided again next round.
	jobsFirst(actions)
	var errs []error
	var withdraws []action
	b := queue.NewLeaderBatch(c.js, lt.epoch)
	b.Folded = folded
	for _, a := range actions {
		if !lt.term.Valid() {
			// The term ended mid-round: what is left is the next
			// leader's to decide. What was published is fenced if it
			// lands after the next election.
			errs = append(errs, ErrNotLeader)
			break
		}
		switch {
		case a.event != nil:
			b.Event(ctx, a.event)
		case a.job != nil:
			b.Job(ctx, a.job.queueJob(), func() { c.published.add(a.job.Attempt) })
		case a.stop != nil:
			if err := c.stop(ctx, lt, a.stop, a.reason, folded); err != nil {
				errs = append(errs, err)
			}
		case a.withdraw != nil, a.unplace != nil:
			withdraws = append(withdraws, a)
		}
	}
	errs = append(errs, c.withdraw(ctx, b, withdraws))
	errs = append(errs, b.Wait(ctx))
	return walk, errors.Join(errs...)
}

// jobsFirst moves a round's jobs ahead of its other actions, keeping
// each group's order. A job is for an attempt decided and folded in an
// earlier round, and a worker waits for it; a round that also decides a
// large flow's attempts publishes thousands of events on the stream the
// fleet keeps busiest, and jobs behind them waited for all of them: with
// 100,000 tasks in 10 flows, jobs were queued minutes after their
// decisions while the fleet's slots sat idle (docs/benchmarks.md). No
// action of a round needs another of the same round before it: an
// attempt's job always follows its decision by a round at least.
func jobsFirst(actions []action) {
	var rest []action
	n := 0
	for _, a := range actions {
		if a.job != nil {
			actions[n] = a
			n++
		} else {
			rest = append(rest, a)
		}
	}
	copy(actions[n:], rest)
}

// stop ends an attempt of a cancelled task. One no worker holds is revoked,
// so none ever will, and recorded as abandoned; the holder of one that runs
// is told to stop its CLI and reports CANCELLED. Both repeat every tick
// until the attempt has ended, so a lost signal only delays the stop.
// folded is what the decision was made from (queue.PublishDecision).
func (c *Controller) stop(ctx context.Context, lt *leaderTerm, a *projection.Attempt, reason string, folded uint64) error {
	err := c.claims.Revoke(ctx, a.ID)
	switch {
	case err == nil:
		ev, err := c.abandonment(a, reason)
		if err != nil {
			return err
		}
		_, err = c.publishDecision(ctx, ev, folded)
		return err
	case errors.Is(err, queue.ErrHeld):
		return queue.SignalCancel(c.js.Conn(), queue.CancelSignal{Attempt: a.ID, Reason: reason, By: queue.CancelByOperator}, lt.epoch)
	default:
		return err
	}
}

// abandonment is what stop records about an attempt whose claim it revoked
// before any worker held it (the decision scenarios fold it too).
func (c *Controller) abandonment(a *projection.Attempt, reason string) (*event.Event, error) {
	if reason == "" {
		reason = "cancelled before a worker ran it"
	}
	return event.New(drovertype.EventID(event.AttemptAbandoned, a.ID), event.AttemptAbandoned, c.now(), a.Flow, a.Task, a.ID, 0,
		event.AttemptAbandonedData{Reason: reason})
}

// withdraw takes back queued attempts before any worker runs them: each
// claim is revoked, so no worker ever will, and attempt_withdrawn (or, for
// one no worker took in time, attempt_unplaced), added to the round's
// batch, records it. One a worker already holds runs on (it
// was running when the reason arose). A cooldown withdraws every attempt
// queued on its runtime at once, while workers that have not met the limit
// yet may be pulling them: the revokes run side by side, withdrawRevokes at
// a time. Like stop, a withdraw repeats every tick until the attempt ended.
func (c *Controller) withdraw(ctx context.Context, b *queue.Batch, acts []action) error {
	var (
		mu   sync.Mutex
		evs  []*event.Event
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, withdrawRevokes)
	for _, a := range acts {
		if _, err := c.leading(); err != nil {
			errs = append(errs, err)
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := c.claims.Revoke(ctx, a.takenBack().ID)
			var ev *event.Event
			switch {
			case err == nil:
				ev, err = c.takeBackEvent(a)
			case errors.Is(err, queue.ErrHeld):
				err = nil
			}
			mu.Lock()
			defer mu.Unlock()
			if ev != nil {
				evs = append(evs, ev)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	for _, ev := range evs {
		b.Event(ctx, ev)
	}
	return errors.Join(errs...)
}

// withdrawRevokes bounds the revokes of one round running at once.
const withdrawRevokes = 16

// takenBack is the attempt a withdraw or an unplace takes back.
func (a action) takenBack() *projection.Attempt {
	if a.unplace != nil {
		return a.unplace
	}
	return a.withdraw
}

// takeBackEvent is what withdraw records of an attempt it took back (the
// decision scenarios fold it too): attempt_withdrawn, or attempt_unplaced.
func (c *Controller) takeBackEvent(a action) (*event.Event, error) {
	if a.unplace != nil {
		return c.unplacement(a.unplace, a.reason, a.unplaced)
	}
	return c.withdrawal(a.withdraw, a.reason)
}

// withdrawal is what withdraw records.
func (c *Controller) withdrawal(a *projection.Attempt, reason string) (*event.Event, error) {
	return event.New(drovertype.EventID(event.AttemptWithdrawn, a.ID), event.AttemptWithdrawn, c.now(), a.Flow, a.Task, a.ID, 0,
		event.AttemptWithdrawnData{Reason: reason})
}

// decider holds one run of the decision function.
type decider struct {
	c    *Controller
	st   *projection.State
	now  time.Time
	out  []action
	live int // attempts scheduled or running, across flows
	// started counts the attempts this round schedules (startsPerRound).
	started int
	flows   []runningFlow
	cool    *cooling // the cooldowns, as the round has decided them so far
	place   *placing // the registry's live workers, and what the round asked of them
}

// decisions is the decision function: folded state in, actions out. It reads the
// clock to stamp the events it creates and to see which retries are due.
func (c *Controller) decisions(st *projection.State) ([]action, error) {
	dc := &decider{c: c, st: st, now: c.now()}
	dc.place = newPlacing(c, dc.now)
	c.published.begin()
	var flows []runningFlow
	for _, f := range st.Flows {
		if !f.State.Terminal() {
			r := runningFlow{f: f}
			r.tasks, r.all = st.OpenTasks(f)
			r.live = dc.liveAttempts(r.tasks)
			dc.live += r.live
			flows = append(flows, r)
		}
	}
	// Oldest flow first: under a global limit, earlier flows go first.
	sort.Slice(flows, func(i, j int) bool {
		a, b := flows[i].f, flows[j].f
		return a.SubmittedAt.Before(b.SubmittedAt) || a.SubmittedAt.Equal(b.SubmittedAt) && a.ID < b.ID
	})
	dc.flows, dc.cool = flows, newCooling(dc)
	// The limits first: a cooldown holds back every flow's attempts, and
	// a probe that got past one lets them start, in this round already.
	if err := dc.limits(); err != nil {
		return nil, err
	}
	if err := dc.releases(); err != nil {
		return nil, err
	}
	for _, r := range flows {
		if err := dc.flow(r); err != nil {
			return nil, err
		}
	}
	if err := dc.servedAgain(); err != nil {
		return nil, err
	}
	if err := dc.publishing(); err != nil {
		return nil, err
	}
	c.published.forgetUnseen()
	return dc.out, nil
}

// published reports whether this process has queued the job of a queued
// attempt (or integration), and keeps that knowledge for the next round.
func (dc *decider) published(id string) bool {
	return dc.c.published.seen(id)
}

// publishedJobs is what jobs this process queued, kept while their
// attempts stay queued, so that the set is the size of the queue rather
// than of the controller's history. A round marks the jobs it finds still
// queued and then forgets the others: marking in place, rather than
// building the set anew, allocates nothing per round (a new set of 10,000
// jobs per round was half of what a large flow's controller allocated).
type publishedJobs struct {
	round uint64
	jobs  map[string]uint64 // job id -> the last round that found it queued
}

func (j *publishedJobs) begin()        { j.round++ }
func (j *publishedJobs) add(id string) { j.jobs[id] = j.round }
func (j *publishedJobs) has(id string) bool {
	_, ok := j.jobs[id]
	return ok
}

func (j *publishedJobs) seen(id string) bool {
	if !j.has(id) {
		return false
	}
	j.jobs[id] = j.round
	return true
}

func (j *publishedJobs) forgetUnseen() {
	for id, round := range j.jobs {
		if round != j.round {
			delete(j.jobs, id)
		}
	}
}

// runningFlow is a flow that has not ended, with its open tasks in order
// and how many of their attempts are live, read once per round. A round
// walks only the open tasks (projection.State.OpenTasks): a settled one
// (ended, and its attempt too) calls for nothing, and a large flow's
// tasks are mostly settled or open, not changing, so a round costs what
// is open rather than all the flow has run.
type runningFlow struct {
	f     *projection.Flow
	tasks []*projection.Task
	all   int // the flow's tasks, open or settled
	live  int
}

// add records a decision of type typ about key (what makes it unique among
// its type's: an attempt, a flow's round), with a deterministic event id.
func (dc *decider) add(key string, typ event.Type, flowID, task, attempt string, data any) error {
	ev, err := event.New(drovertype.EventID(typ, key), typ, dc.now, flowID, task, attempt, 0, data)
	if err != nil {
		return err
	}
	dc.out = append(dc.out, action{event: ev})
	return nil
}

// liveAttempt returns the task's current attempt if it has not ended.
func (dc *decider) liveAttempt(t *projection.Task) *projection.Attempt {
	if a := dc.st.Attempts[t.Attempt]; a != nil && !a.State.Terminal() {
		return a
	}
	return nil
}

func (dc *decider) liveAttempts(tasks []*projection.Task) int {
	n := 0
	for _, t := range tasks {
		if dc.liveAttempt(t) != nil {
			n++
		}
	}
	return n
}

// startsPerRound bounds the attempts one round schedules. A round's
// decisions are stored (each a synced write on the stream the fleet keeps
// busiest) before the next round queues their jobs; a round that started
// every ready task of large flows at once held all their jobs back for
// the whole of it: with 100,000 tasks in 10 flows, jobs were queued
// minutes after their decisions while the fleet's slots sat idle, and a
// 10,000-task flow's first job waited for 10,000 decisions
// (docs/benchmarks.md). Bounded, decisions and jobs go out in turns; the
// rest start in the rounds after, which the fold of these decisions
// brings at once.
const startsPerRound = 1000

// mayStart reports whether one more attempt fits the round's bound and the
// flow's and the global concurrency limits, counting it if so.
func (dc *decider) mayStart(f *projection.Flow, flowLive *int) bool {
	if f.Paused || f.Cancel != nil || dc.started >= startsPerRound {
		return false
	}
	if f.MaxParallel > 0 && *flowLive >= f.MaxParallel {
		return false
	}
	if g := dc.c.cfg.Controller.MaxParallel; g > 0 && dc.live >= g {
		return false
	}
	*flowLive++
	dc.live++
	dc.started++
	return true
}

func (dc *decider) flow(r runningFlow) error {
	flowLive := r.live
	for _, t := range r.tasks {
		if err := dc.task(r.f, t, &flowLive); err != nil {
			return err
		}
	}
	return dc.finish(r)
}

func (dc *decider) task(f *projection.Flow, t *projection.Task, flowLive *int) error {
	a := dc.liveAttempt(t)
	// Cancellation first: the task ends now, its attempt as soon as the
	// worker holding it has stopped the CLI.
	if !t.State.Terminal() && (f.Cancel != nil || t.CancelRequested) {
		reason := "cancelled by the operator"
		if f.Cancel != nil && f.Cancel.Reason != "" {
			reason += ": " + f.Cancel.Reason
		}
		id := fmt.Sprintf("%s/%s:%d", f.ID, t.ID, t.Round)
		return dc.add(id, event.TaskCancelled, f.ID, t.ID, t.Attempt, event.TaskCancelledData{Reason: reason})
	}
	if t.State == drovertype.TaskCancelled && a != nil {
		reason := "cancelled by the operator"
		if t.Error != nil && t.Error.Message != "" {
			reason = t.Error.Message
		}
		dc.out = append(dc.out, action{stop: a, reason: reason})
		return nil
	}
	if done, err := dc.budget(f, t, a); done {
		return err
	}
	switch t.State {
	case drovertype.TaskPending:
		if merge, ready := readyMerge(dc.st, f, t); ready {
			return dc.begin(f, t, merge, nil, flowLive)
		}
	case drovertype.TaskRetrying:
		r := t.Retry
		if r == nil || dc.now.Before(r.DueAt) {
			return nil
		}
		if merge, ready := readyMerge(dc.st, f, t); ready {
			return dc.begin(f, t, merge, r, flowLive)
		}
	case drovertype.TaskScheduled, drovertype.TaskRunning:
		at := dc.st.Attempts[t.Attempt]
		if at == nil {
			return nil
		}
		switch {
		case at.State == drovertype.AttemptScheduled:
			if h, ok := dc.withdrawable(at); ok {
				dc.out = append(dc.out, action{withdraw: at, reason: h.reason})
				return nil
			}
			if out, err := dc.unplaced(t, at); out || err != nil {
				return err
			}
			if !dc.published(at.ID) {
				dc.out = append(dc.out, action{job: dc.c.job(f, t, at, dc.st.TaskSpec(f, t.ID))})
			}
		case at.State == drovertype.AttemptFailed && at.Error == nil:
			info := event.ErrorInfo{Class: drovertype.ClassUnknown, Message: "attempt failed without an error"}
			if at.Report != nil && at.Report.Error != nil {
				info = *at.Report.Error
			}
			return dc.add(at.ID, event.RuntimeErrorClassified, f.ID, t.ID, at.ID,
				event.RuntimeErrorClassifiedData{ErrorInfo: info})
		case at.State == drovertype.AttemptFailed:
			return dc.recover(f, t, at)
		}
	}
	return nil
}

// recover applies the retry policy to the task's failed attempt: a retry
// scheduled for later (runtime_recovery_scheduled), or the task fails.
func (dc *decider) recover(f *projection.Flow, t *projection.Task, a *projection.Attempt) error {
	plan := t.Plan
	if plan == nil {
		plan = &policy.Resolved{Worker: policy.Choice{Name: t.Runtime}, Retry: policy.DefaultRetry()}
	}
	e := a.Error
	// The decision is a function of the attempt alone (its end time, not
	// the clock), so re-deriving it after a restart gives the same retry.
	at := a.EndedAt
	if at.IsZero() {
		at = a.ScheduledAt
	}
	run := dc.attemptRun(f, t)
	d := policy.Decide(plan.Retry, plan.Worker.Name, plan.Worker.Model, policy.Failure{
		Class: e.Class, Attempts: run.counted, LimitedSince: run.limitedSince, Runtime: a.Runtime, Model: a.Model,
		RetryAfter: time.Duration(e.RetryAfterMS) * time.Millisecond, ResetAt: e.ResetAt,
	}, at, a.ID)
	if !d.Retry {
		reason := fmt.Sprintf("attempt %d failed: %s: %s (%s)", a.N, e.Class, e.Message, d.Reason)
		return dc.add(a.ID, event.TaskFailed, f.ID, t.ID, a.ID,
			event.TaskFailedData{Reason: reason, Class: e.Class})
	}
	return dc.add(a.ID, event.RuntimeRecoveryScheduled, f.ID, t.ID, a.ID,
		event.RuntimeRecoveryScheduledData{
			Strategy: d.Strategy, N: t.Attempts + 1, Runtime: d.Runtime, Model: d.Model,
			DelayMS: d.Delay.Milliseconds(), DueAt: at.Add(d.Delay), Reason: d.Reason,
		})
}

// begin starts a ready task's next attempt (retry nil: a new one), where
// the cooldowns allow: the first runtime of its chain they do not hold
// back, as that runtime's probe when its cooldown has just ended. Held
// back everywhere, the task waits, and says why.
func (dc *decider) begin(f *projection.Flow, t *projection.Task, merge []event.DepResult, retry *projection.PendingRetry, flowLive *int) error {
	at := dc.where(t, retry)
	if at.wait != nil {
		if f.Paused || f.Cancel != nil {
			return nil // it waits for the operator first
		}
		if out, err := dc.limitedOut(f, t); out || err != nil {
			return err
		}
		return dc.waitFor(f, t, at.wait)
	}
	if !dc.mayStart(f, flowLive) {
		if t.Waiting() != nil && !f.Paused && f.Cancel == nil {
			return dc.waitFor(f, t, &hold{}) // no cooldown holds it back now: a limit does
		}
		return nil
	}
	prompt := t.Prompt // a review round's task has its own; a flow file's task, its spec's
	if retry != nil {
		prompt = dc.retryPrompt(f, t)
	}
	if len(at.probe) > 0 {
		dc.cool.probe(at.probe, drovertype.AttemptID(f.ID, t.ID, t.Attempts+1))
	}
	return dc.schedule(f, t, merge, at.runtime, at.model, at.args, prompt, at.probe)
}

// retryPrompt is the task's prompt with the feedback of its last attempt.
// After an attempt withdrawn before it ran, or that no worker took, the
// next gets its prompt: there is nothing to tell the agent.
func (dc *decider) retryPrompt(f *projection.Flow, t *projection.Task) string {
	prompt := t.Prompt // a review round's task is not in the flow file
	if spec := dc.st.TaskSpec(f, t.ID); spec != nil {
		prompt = spec.Prompt
	}
	if prompt == "" {
		return ""
	}
	prev := dc.st.Attempts[t.Attempt]
	if prev == nil {
		return prompt
	}
	if prev.State == drovertype.AttemptWithdrawn || classOf(prev) == drovertype.ClassNoWorker {
		return prev.Prompt
	}
	fb := feedback.FeedbackFrom(prev.N, prev.Runtime, prev.Error, prev.Report)
	if fb.Verification == nil {
		fb.Verification = prev.Verification
	}
	return feedback.ComposePrompt(prompt, &fb)
}

// finish completes a flow whose tasks have all ended and whose attempts have
// all stopped, after building its integration branch from the tasks that
// succeeded.
func (dc *decider) finish(r runningFlow) error {
	f := r.f
	for _, t := range r.tasks {
		if !t.State.Terminal() || dc.liveAttempt(t) != nil {
			return nil
		}
	}
	tasks := r.tasks
	if len(tasks) < r.all {
		tasks = dc.st.OrderedTasks(f) // the settled ones too
	}
	allOK := true
	var merge []event.DepResult
	runtime := ""
	for _, t := range tasks {
		if t.State != drovertype.TaskSucceeded {
			allOK = false
			continue
		}
		merge = append(merge, event.DepResult{Task: t.ID, Branch: t.ResultBranch, Commit: t.ResultCommit})
		runtime = t.Runtime
		if a := dc.st.Attempts[t.Attempt]; a != nil {
			runtime = a.Runtime
		}
	}
	id := f.ID
	if f.Round > 0 {
		id = fmt.Sprintf("%s:r%d", id, f.Round)
	}
	complete := func(state drovertype.FlowState) error {
		return dc.add(id, event.FlowCompleted, f.ID, "", "", event.FlowCompletedData{State: state, Round: f.Round})
	}
	if f.Cancel != nil {
		return complete(drovertype.FlowCancelled)
	}
	if len(merge) == 0 {
		return complete(drovertype.FlowFailed)
	}
	n := f.Round + 1
	in := f.Integration
	switch {
	case in == nil || in.N < n:
		d := event.IntegrationScheduledData{N: n, Branch: drovertype.IntegrationBranch(f.ID, n), Runtime: runtime,
			Pool: dc.c.cfg.Defaults.Pool}
		if !prBuild(f, &d, merge) {
			if !allOK {
				return complete(drovertype.FlowFailed) // a round whose tasks all failed: nothing to push
			}
			d.Merge = nil // nothing new: the branch is built again as it is
		}
		return dc.add(fmt.Sprintf("%s:%d", f.ID, n), event.IntegrationScheduled, f.ID, "", "", d)
	case in.State == drovertype.IntegrationScheduled:
		jobID := drovertype.IntegrationID(f.ID, in.N)
		if !dc.published(jobID) {
			dc.out = append(dc.out, action{job: &jobSpec{
				Kind: drovertype.JobIntegrate, Attempt: jobID, Flow: f.ID, N: in.N, Pool: in.Pool, Runtime: in.Runtime,
				Repo: f.Spec.Repo, Base: cmp.Or(in.Base, f.Spec.Base), Branch: in.Branch, Merge: in.Merge,
			}})
		}
		return nil
	case in.State == drovertype.IntegrationSucceeded && allOK:
		return complete(drovertype.FlowSucceeded)
	default:
		return complete(drovertype.FlowFailed)
	}
}

// readyMerge reports whether every dependency of t succeeded, and their
// results in the order t lists them.
func readyMerge(st *projection.State, f *projection.Flow, t *projection.Task) ([]event.DepResult, bool) {
	merge := make([]event.DepResult, 0, len(t.DependsOn))
	for _, dep := range t.DependsOn {
		d := st.Task(f.ID, dep)
		if d == nil || d.State != drovertype.TaskSucceeded {
			return nil, false
		}
		merge = append(merge, event.DepResult{Task: dep, Branch: d.ResultBranch, Commit: d.ResultCommit})
	}
	return merge, true
}

// schedule records the task's next attempt, the probe of the cooldowns
// probe names. runtime "" means the task's resolved runtime, with its model
// and arguments.
func (dc *decider) schedule(f *projection.Flow, t *projection.Task, merge []event.DepResult, runtime, model string, args []string, prompt string, probe []string) error {
	n := t.Attempts + 1
	id := drovertype.AttemptID(f.ID, t.ID, n)
	if runtime == "" {
		runtime = t.Runtime
		if t.Plan != nil {
			runtime, model, args = t.Plan.Worker.Name, t.Plan.Worker.Model, t.Plan.Worker.Args
		}
	}
	timeout := f.Spec.Timeout
	if spec := dc.st.TaskSpec(f, t.ID); spec != nil && spec.Timeout > 0 {
		timeout = spec.Timeout
	}
	if t.Plan != nil && t.Plan.Timeout > 0 {
		timeout = t.Plan.Timeout
	}
	return dc.add(id, event.AttemptScheduled, f.ID, t.ID, id, event.AttemptScheduledData{
		N: n, Runtime: runtime, Model: model, Args: args, Pool: dc.c.cfg.Defaults.Pool,
		Branch: drovertype.AttemptBranch(f.ID, t.ID, n), Timeout: timeout, Merge: merge, Prompt: prompt, Probe: probe,
	})
}

// job is the queued job of a task's attempt; spec is the task's in the
// flow file, nil for a review round's.
func (c *Controller) job(f *projection.Flow, t *projection.Task, a *projection.Attempt, spec *flow.Task) *jobSpec {
	j := &jobSpec{
		Attempt: a.ID, Flow: f.ID, Task: t.ID, N: a.N, Pool: a.Pool, Runtime: a.Runtime, Model: a.Model, Args: a.Args,
		Repo: f.Spec.Repo, Base: cmp.Or(t.Base, f.Spec.Base), Branch: a.Branch, Prompt: cmp.Or(a.Prompt, t.Prompt),
		Timeout: a.Timeout, Merge: a.Merge,
	}
	if spec != nil {
		if j.Prompt == "" {
			j.Prompt = spec.Prompt
		}
		j.Verify, j.VerifyTimeout = spec.Verify, spec.VerifyTimeout
		j.Scope = f.Spec.ScopeFor(spec)
	}
	if plan := t.Plan; plan != nil {
		j.Scope = plan.Scope
		if plan.Review && plan.Validator != nil {
			j.Review = &reviewSpec{Runtime: plan.Validator.Name, Model: plan.Validator.Model, Args: plan.Validator.Args}
			if spec != nil {
				j.Review.Task = spec.Prompt
			}
		}
	}
	return j
}
