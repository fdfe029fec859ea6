package projection

import (
	"fmt"
	"maps"
	"time"

	"github.com/drover-dev/drover/internal/event"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// ApplyRaw folds one message off the EVENTS stream. Undecodable messages are
// recorded as poison at their sequence; they never stop the fold.
func (s *State) ApplyRaw(seq uint64, raw []byte) { s.ApplyDecoded(seq, decodeTwoPass(raw)) }

// ApplyDecoded folds a message DecodeForFold decoded and returns its
// envelope, nil for poison.
func (s *State) ApplyDecoded(seq uint64, d Decoded) *event.Event {
	if d.err != nil {
		s.poison(seq, d.err, d.size)
		return nil
	}
	if err := s.apply(seq, d.ev, d.payload, d.payloadErr); err != nil {
		s.poison(seq, err, d.size)
		return nil
	}
	return d.ev
}

func (s *State) poison(seq uint64, err error, size int) {
	s.Poisons[seq] = &Poison{Seq: seq, Reason: err.Error(), Size: size}
	s.mark(poisonKey(seq))
}

// Apply folds one decoded event. It is a pure function of the state and the
// event: no clock, no I/O. An event id seen before changes nothing; an event
// that does not fit the state (unknown flow, superseded claim, attempt already
// finished) is ignored, because at-least-once delivery and fencing make such
// events normal. It returns an error only for a payload that cannot be decoded.
// Every known type's payload is decoded before the state is looked at, so
// whether an event is poison depends on its bytes alone, and a poison event
// changes nothing but the set of ids seen.
func (s *State) Apply(seq uint64, ev *event.Event) error {
	payload, err := decodePayload(ev)
	return s.apply(seq, ev, payload, err)
}

// apply is Apply with the payload decoded, or why it could not be.
func (s *State) apply(seq uint64, ev *event.Event, payload any, payloadErr error) error {
	if _, dup := s.Seen[ev.ID]; dup {
		return nil
	}
	s.Seen[ev.ID] = seq
	s.mark(keySeen + ev.ID)

	h, ok := handlers[ev.Type]
	if !ok {
		// Unknown types from newer writers are kept in the log but change nothing.
		return nil
	}
	if payloadErr != nil {
		return payloadErr
	}
	return h.fold(s, ev, payload)
}

func (s *State) flowSubmitted(ev *event.Event, d *event.FlowSubmittedData) error {
	if d.Parts < 0 || d.Parts > flow.MaxTasks {
		return fmt.Errorf("%w: flow_submitted with %d parts", event.ErrDecode, d.Parts)
	}
	if _, ok := s.Flows[ev.Flow]; ok {
		return nil
	}
	if d.Parts > 0 {
		// The tasks come from the parts, which the controller recorded
		// first. A flow missing one is not a flow: the submission failed
		// half way, and the controller told the submitter so.
		for i := 1; i <= d.Parts; i++ {
			if s.Parts[partKey(ev.Flow, i)] == nil {
				return nil
			}
		}
		d.Spec.Tasks, d.Plan = nil, map[string]policy.Resolved{}
		for i := 1; i <= d.Parts; i++ {
			k := partKey(ev.Flow, i)
			p := s.Parts[k]
			d.Spec.Tasks = append(d.Spec.Tasks, p.Tasks...)
			maps.Copy(d.Plan, p.Plan)
			delete(s.Parts, k)
			s.mark(keyPart + k)
		}
	}
	f := &Flow{ID: ev.Flow, State: drovertype.FlowRunning, SubmittedAt: ev.Time, Order: d.Spec.TopoOrder(), Spec: d.Spec,
		MaxParallel: d.MaxParallel}
	s.Flows[f.ID] = f
	s.mark(keyFlow + f.ID)
	f.Budget = d.Budget
	for i := range d.Spec.Tasks {
		t := &d.Spec.Tasks[i]
		task := &Task{
			Flow: f.ID, ID: t.ID, State: drovertype.TaskPending, DependsOn: t.DependsOn,
			Runtime: d.Spec.RuntimeFor(t), UpdatedAt: ev.Time,
		}
		task.Budget = t.Budget
		if plan, ok := d.Plan[t.ID]; ok {
			task.Plan = s.sharedPlan(&plan)
			task.Runtime = plan.Worker.Name
		}
		s.putTask(task)
	}
	return nil
}

// flowTasksSubmitted keeps a part of a large flow until its flow_submitted.
func (s *State) flowTasksSubmitted(ev *event.Event, d *event.FlowTasksSubmittedData) error {
	if d.Part < 1 || d.Part > flow.MaxTasks {
		return fmt.Errorf("%w: flow_tasks_submitted part %d", event.ErrDecode, d.Part)
	}
	k := partKey(ev.Flow, d.Part)
	if _, ok := s.Flows[ev.Flow]; ok || s.Parts[k] != nil {
		return nil
	}
	s.Parts[k] = &SubmittedPart{Flow: ev.Flow, FlowTasksSubmittedData: *d}
	s.mark(keyPart + k)
	return nil
}

func (s *State) putTask(t *Task) {
	k := TaskKey(t.Flow, t.ID)
	s.Tasks[k] = t
	s.mark(keyTask + k)
}

func (s *State) touchTask(t *Task, ev *event.Event) {
	t.UpdatedAt = ev.Time
	s.mark(keyTask + TaskKey(t.Flow, t.ID))
}

func (s *State) touchAttempt(a *Attempt) { s.mark(keyAttempt + a.ID) }

func (s *State) flowCompleted(ev *event.Event, d *event.FlowCompletedData) error {
	if !d.State.Terminal() {
		return fmt.Errorf("%w: flow_completed with state %q", event.ErrDecode, d.State)
	}
	f := s.Flows[ev.Flow]
	if f == nil || f.State.Terminal() || d.Round != f.Round {
		return nil
	}
	f.State = d.State
	f.CompletedAt = ev.Time
	s.mark(keyFlow + f.ID)
	return nil
}

func (s *State) attemptScheduled(ev *event.Event, d *event.AttemptScheduledData) error {
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || (t.State != drovertype.TaskPending && t.State != drovertype.TaskRetrying) {
		return nil
	}
	if d.N != t.Attempts+1 || s.Attempts[ev.Attempt] != nil {
		return nil
	}
	a := &Attempt{
		ID: ev.Attempt, Flow: ev.Flow, Task: ev.Task, N: d.N, Runtime: d.Runtime, Model: d.Model, Args: d.Args,
		Pool: d.Pool, Branch: d.Branch, Prompt: d.Prompt, Timeout: d.Timeout, Merge: d.Merge,
		State: drovertype.AttemptScheduled, ScheduledAt: ev.Time,
	}
	s.Attempts[a.ID] = a
	s.touchAttempt(a)
	s.probe(a, d.Probe)
	t.State, t.Attempts, t.Attempt, t.Retry = drovertype.TaskScheduled, d.N, a.ID, nil
	s.touchTask(t, ev)
	return nil
}

// live returns the attempt an event is about, if it is still open.
func (s *State) live(ev *event.Event) *Attempt {
	a := s.Attempts[ev.Attempt]
	if a == nil || a.Flow != ev.Flow || a.State.Terminal() {
		return nil
	}
	return a
}

func (s *State) attemptClaimed(ev *event.Event, d *event.AttemptClaimedData) error {
	a := s.live(ev)
	if a == nil {
		return nil
	}
	if ev.Epoch <= a.Epoch {
		a.Fenced++
		s.touchAttempt(a)
		return nil
	}
	a.Epoch, a.Worker, a.State, a.Phase, a.ClaimedAt = ev.Epoch, d.Worker, drovertype.AttemptClaimed, ev.Type, ev.Time
	s.touchAttempt(a)
	// A task the controller already finished (failed while its attempt was
	// queued, say) stays finished: the claim is the attempt's business only.
	if t := s.Task(a.Flow, a.Task); t != nil && t.Attempt == a.ID && !t.State.Terminal() {
		t.State = drovertype.TaskRunning
		s.touchTask(t, ev)
	}
	return nil
}

// current returns the open attempt an event is about if the event comes from
// the claim that holds it now; events from a superseded claim are fenced off.
func (s *State) current(ev *event.Event) *Attempt {
	a := s.live(ev)
	if a == nil {
		return nil
	}
	if ev.Epoch != a.Epoch || a.State != drovertype.AttemptClaimed {
		a.Fenced++
		s.touchAttempt(a)
		return nil
	}
	return a
}

// phase folds a lifecycle event of an attempt, whose payload is a T.
func phase[T any](s *State, ev *event.Event, d *T) error { return s.attemptPhase(ev, d) }

func (s *State) attemptPhase(ev *event.Event, p any) error {
	a := s.current(ev)
	if a == nil {
		return nil
	}
	a.Phase = ev.Type
	switch d := p.(type) {
	case *event.PrepareCompletedData:
		a.Worktree, a.BaseCommit = d.Worktree, d.BaseCommit
	case *event.RuntimeStartedData:
		a.Pid = d.Pid
	case *event.DiffComputedData:
		a.DiffStat = d.Stat
	case *event.Verification:
		a.Verification = d
	}
	s.touchAttempt(a)
	return nil
}

func (s *State) attemptReported(ev *event.Event, r *event.Report) error {
	a := s.current(ev)
	if a == nil {
		return nil
	}
	// r comes without its stdout tail, which stays in the event
	// (see Attempt.Report).
	a.Report, a.ReportEventID, a.Phase, a.EndedAt = r, ev.ID, ev.Type, ev.Time
	a.State = drovertype.AttemptFailed
	if r.Success {
		a.State = drovertype.AttemptSucceeded
	}
	s.touchAttempt(a)
	s.addSpend(a, r.Usage)
	t := s.Task(a.Flow, a.Task)
	if t == nil || t.Attempt != a.ID || t.State.Terminal() {
		return nil
	}
	if r.Success {
		t.State, t.ResultBranch, t.ResultCommit, t.Error = drovertype.TaskSucceeded, r.Branch, r.Commit, nil
	}
	// A failed attempt leaves the task running until the controller decides.
	s.touchTask(t, ev)
	return nil
}

func (s *State) errorClassified(ev *event.Event, d *event.RuntimeErrorClassifiedData) error {
	a := s.Attempts[ev.Attempt]
	if a == nil || a.Flow != ev.Flow {
		return nil
	}
	info := d.ErrorInfo
	a.Error = &info
	s.touchAttempt(a)
	return nil
}

func (s *State) taskFailed(ev *event.Event, d *event.TaskFailedData) error {
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || t.State.Terminal() {
		return nil
	}
	t.State, t.Retry = drovertype.TaskFailed, nil
	t.Error = &event.ErrorInfo{Class: d.Class, Message: d.Reason}
	s.touchTask(t, ev)
	s.blockDependents(ev, t)
	return nil
}

func (s *State) recoveryScheduled(ev *event.Event, d *event.RuntimeRecoveryScheduledData) error {
	// Only the decision about the task's current, failed attempt counts.
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || t.State != drovertype.TaskRunning || t.Attempt != ev.Attempt || d.N != t.Attempts+1 {
		return nil
	}
	if a := s.Attempts[ev.Attempt]; a == nil || a.State != drovertype.AttemptFailed {
		return nil
	}
	t.State = drovertype.TaskRetrying
	t.Retry = &PendingRetry{N: d.N, Strategy: d.Strategy, Runtime: d.Runtime, Model: d.Model, DueAt: d.DueAt, Reason: d.Reason}
	s.touchTask(t, ev)
	return nil
}

func (s *State) cancelRequested(ev *event.Event, d *event.CancelRequestedData) error {
	// The scope is checked before the state is looked at, so that whether
	// the event is poison depends on its bytes alone.
	switch d.Scope {
	case event.CancelFlow, event.CancelTask, event.CancelAttempt:
	default:
		return fmt.Errorf("%w: cancel_requested with scope %q", event.ErrDecode, d.Scope)
	}
	f := s.Flows[ev.Flow]
	if f == nil || f.State.Terminal() {
		return nil
	}
	if d.Scope == event.CancelFlow {
		if f.Cancel == nil {
			f.Cancel = &Cancel{Reason: d.Reason, At: ev.Time}
			s.mark(keyFlow + f.ID)
		}
		return nil
	}
	// Cancelling an attempt cancels the task it runs for, if it is still
	// the task's current attempt: the task is what finishes.
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || t.State.Terminal() || (d.Scope == event.CancelAttempt && t.Attempt != ev.Attempt) {
		return nil
	}
	t.CancelRequested = true
	s.touchTask(t, ev)
	return nil
}

func (s *State) taskCancelled(ev *event.Event, d *event.TaskCancelledData) error {
	t := s.Task(ev.Flow, ev.Task)
	if t == nil || t.State.Terminal() {
		return nil
	}
	t.State, t.Retry = drovertype.TaskCancelled, nil
	t.Error = &event.ErrorInfo{Class: drovertype.ClassCancelled, Message: d.Reason}
	s.touchTask(t, ev)
	s.blockDependents(ev, t)
	return nil
}

func (s *State) attemptAbandoned(ev *event.Event, d *event.AttemptAbandonedData) error {
	a := s.live(ev)
	if a == nil {
		return nil
	}
	a.State, a.EndedAt, a.Phase = drovertype.AttemptFailed, ev.Time, ev.Type
	a.Error = &event.ErrorInfo{Class: drovertype.ClassCancelled, Message: d.Reason}
	s.touchAttempt(a)
	return nil
}

// attemptLost ends an attempt whose worker went silent. It counts for the
// claim it names or a newer one than the fold has seen (the worker may have
// died before its attempt_claimed was published); a loss of an older claim
// than the current one is fenced off.
func (s *State) attemptLost(ev *event.Event, d *event.AttemptLostData) error {
	a := s.live(ev)
	if a == nil {
		return nil
	}
	if ev.Epoch < a.Epoch {
		a.Fenced++
		s.touchAttempt(a)
		return nil
	}
	a.State, a.EndedAt, a.Phase, a.Epoch, a.Worker = drovertype.AttemptFailed, ev.Time, ev.Type, ev.Epoch, d.Worker
	a.Error = &event.ErrorInfo{Class: drovertype.ClassWorkerLost, Category: drovertype.CategoryInfrastructure, Recoverable: true,
		Message: fmt.Sprintf("worker %s stopped renewing its claim (epoch %d): %s", d.Worker, ev.Epoch, d.Reason)}
	s.touchAttempt(a)
	// The attempt awaits the controller's decision, like a reported failure;
	// a task whose claim was never folded moves on from scheduled.
	if t := s.Task(a.Flow, a.Task); t != nil && t.Attempt == a.ID && t.State == drovertype.TaskScheduled {
		t.State = drovertype.TaskRunning
		s.touchTask(t, ev)
	}
	return nil
}

func (s *State) flowPaused(ev *event.Event, _ *event.OperatorData) error {
	f := s.Flows[ev.Flow]
	if f == nil || f.State.Terminal() {
		return nil
	}
	f.Paused = ev.Type == event.FlowPaused
	s.mark(keyFlow + f.ID)
	return nil
}

// retryRequested reopens a failed or cancelled task (and its flow, if it had
// finished): the task is pending again with a fresh retry budget, and the
// tasks it blocked wait for it again.
func (s *State) retryRequested(ev *event.Event, _ *event.OperatorData) error {
	f := s.Flows[ev.Flow]
	t := s.Task(ev.Flow, ev.Task)
	if f == nil || t == nil || f.Cancel != nil {
		return nil
	}
	if t.State != drovertype.TaskFailed && t.State != drovertype.TaskCancelled {
		return nil
	}
	if a := s.Attempts[t.Attempt]; a != nil && !a.State.Terminal() {
		return nil // its cancelled attempt has not ended yet
	}
	t.State, t.Error, t.Retry, t.CancelRequested = drovertype.TaskPending, nil, nil, false
	t.RetryBase, t.Round = t.Attempts, t.Round+1
	s.touchTask(t, ev)
	for _, id := range f.Order {
		if b := s.Task(f.ID, id); b != nil && b.State == drovertype.TaskBlocked && b.BlockedBy == t.ID {
			b.State, b.BlockedBy = drovertype.TaskPending, ""
			s.touchTask(b, ev)
		}
	}
	// A task that was also downstream of another failure stays blocked.
	for _, id := range f.Order {
		if o := s.Task(f.ID, id); o != nil && (o.State == drovertype.TaskFailed || o.State == drovertype.TaskCancelled) {
			s.blockDependents(ev, o)
		}
	}
	// A new round: the flow completes again, and its integration branch is
	// built again with this task's new result, even if the last round's was
	// already scheduled or built. Every retry starts one, finished flow or
	// not: a completion the controller decided before the retry was folded
	// (with nothing to integrate, say) is then stale, rather than ending the
	// flow with this task pending.
	f.State, f.CompletedAt, f.Round = drovertype.FlowRunning, time.Time{}, f.Round+1
	s.mark(keyFlow + f.ID)
	return nil
}

func (s *State) integrationScheduled(ev *event.Event, d *event.IntegrationScheduledData) error {
	f := s.Flows[ev.Flow]
	if f == nil || f.State.Terminal() {
		return nil
	}
	if d.N != f.Round+1 || (f.Integration != nil && f.Integration.N >= d.N) {
		return nil
	}
	merge := d.Merge
	if len(merge) == 0 {
		// The decision names no tasks (a flow may have thousands): the
		// integration merges the flow's succeeded tasks in order, as they
		// are now — as they were when it was decided, since a change to
		// any of them since would have made this round's decision stale.
		for _, t := range s.FlowTasks(f) {
			if t.State == drovertype.TaskSucceeded {
				merge = append(merge, event.DepResult{Task: t.ID, Branch: t.ResultBranch, Commit: t.ResultCommit})
			}
		}
	}
	f.Integration = &Integration{N: d.N, State: drovertype.IntegrationScheduled, Branch: d.Branch, Runtime: d.Runtime,
		Pool: d.Pool, Merge: merge}
	s.mark(keyFlow + f.ID)
	return nil
}

func (s *State) flowIntegrated(ev *event.Event, d *event.FlowIntegratedData) error {
	f := s.Flows[ev.Flow]
	if f == nil || f.Integration == nil || f.Integration.N != d.N || f.Integration.State != drovertype.IntegrationScheduled {
		return nil
	}
	in := f.Integration
	in.State, in.Commit, in.Error = drovertype.IntegrationSucceeded, d.Commit, d.Error
	if d.Error != nil {
		in.State = drovertype.IntegrationFailed
	}
	s.mark(keyFlow + f.ID)
	return nil
}

// blockDependents marks every task downstream of a failed one as blocked by
// it: BlockedBy names the failed task, however far upstream.
func (s *State) blockDependents(ev *event.Event, failed *Task) {
	f := s.Flows[failed.Flow]
	if f == nil {
		return
	}
	// Order lists dependencies first, so one pass reaches every descendant.
	bad := map[string]string{failed.ID: failed.ID}
	for _, id := range f.Order {
		t := s.Task(f.ID, id)
		if t == nil {
			continue
		}
		if t.State.Terminal() {
			// A task this failure blocked already passes it on: when an
			// operator retry reopens another task, the tasks downstream
			// of both must wait for this one again.
			if t.State == drovertype.TaskBlocked && t.BlockedBy == failed.ID {
				bad[id] = failed.ID
			}
			continue
		}
		for _, dep := range t.DependsOn {
			if root, ok := bad[dep]; ok {
				t.State, t.BlockedBy = drovertype.TaskBlocked, root
				bad[id] = root
				s.touchTask(t, ev)
				break
			}
		}
	}
}
