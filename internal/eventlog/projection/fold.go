package projection

import (
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
)

// ApplyRaw folds one message off the EVENTS stream, received on subject.
// Undecodable messages are recorded as poison at their sequence; they
// never stop the fold.
func (s *State) ApplyRaw(seq uint64, subject string, raw []byte) {
	s.ApplyDecoded(seq, decodeTwoPass(subject, raw))
}

// ApplyDecoded folds a message DecodeForFold decoded and returns its
// envelope, nil for poison.
func (s *State) ApplyDecoded(seq uint64, d Decoded) *event.Event {
	if d.err != nil {
		s.poison(seq, d.err, d.size)
		return nil
	}
	if err := s.apply(seq, d.subject, d.ev, d.payload, d.payloadErr); err != nil {
		s.poison(seq, err, d.size)
		return nil
	}
	return d.ev
}

// poison records the event at seq as poison, keeping the last MaxPoisons
// records: the oldest beyond that is removed, in the same batch.
func (s *State) poison(seq uint64, err error, size int) {
	if _, ok := s.Poisons[seq]; !ok {
		s.poisonSeqs = insertSeq(s.poisonSeqs, seq)
	}
	s.Poisons[seq] = &Poison{Seq: seq, Reason: capReason(err.Error()), Size: size}
	s.mark(poisonKey(seq))
	s.PoisonCount++
	s.mark(keyPoisonCount)
	for len(s.poisonSeqs) > MaxPoisons {
		old := s.poisonSeqs[0]
		s.poisonSeqs = s.poisonSeqs[1:]
		delete(s.Poisons, old)
		s.mark(poisonKey(old))
	}
}

// capReason bounds a poison reason, cut on a character boundary.
func capReason(r string) string {
	if len(r) <= maxPoisonReason {
		return r
	}
	cut := maxPoisonReason - len("...")
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut] + "..."
}

// Apply folds one decoded event as if it came on its own subject
// (event.Subject). It is a pure function of the state and the event: no
// clock, no I/O. It returns why the event is poison, nil when it was folded
// or ignored; see doc.go for which is which. A poison event changes
// nothing, not even the ids seen, and an event id seen before changes
// nothing. Every known type's payload is decoded before the state is
// looked at.
func (s *State) Apply(seq uint64, ev *event.Event) error {
	payload, err := decodePayload(ev)
	return s.apply(seq, event.Subject(ev.Flow, ev.Type), ev, payload, err)
}

// apply is Apply with the subject the event came on and the payload
// decoded, or why it could not be.
func (s *State) apply(seq uint64, subject string, ev *event.Event, payload any, payloadErr error) error {
	h, known := handlers[ev.Type]
	if err := checkEnvelope(subject, ev, h, known); err != nil {
		return err
	}
	if _, dup := s.Seen[ev.ID]; dup {
		return nil
	}
	if payloadErr != nil {
		return payloadErr
	}
	if h.about.decision() {
		if stale, err := s.fenced(ev); stale || err != nil {
			return err
		}
	}
	// A handler checks everything before it changes anything: an error
	// leaves the state as it was.
	s.seq = seq
	if err := h.fold(s, ev, payload); err != nil {
		return err
	}
	s.Seen[ev.ID] = seq
	s.seenDirty = append(s.seenDirty, seenID{ev.ID, seq})
	return nil
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
		// first; it records the flow only once they all are.
		if len(d.Spec.Tasks) > 0 || len(d.Plan) > 0 {
			return malformed("flow_submitted of flow %s in %d parts has tasks of its own", ev.Flow, d.Parts)
		}
		d.Plan = map[string]policy.Resolved{}
		for i := 1; i <= d.Parts; i++ {
			p := s.Parts[partKey(ev.Flow, i)]
			if p == nil {
				return contradiction("flow_submitted of flow %s names %d parts; part %d was never recorded", ev.Flow, d.Parts, i)
			}
			d.Spec.Tasks = append(d.Spec.Tasks, p.Tasks...)
			maps.Copy(d.Plan, p.Plan)
		}
	}
	if err := checkSubmitted(ev.Flow, d); err != nil {
		return err
	}
	for i := 1; i <= d.Parts; i++ {
		k := partKey(ev.Flow, i)
		delete(s.Parts, k)
		s.mark(keyPart + k)
	}
	f := &Flow{ID: ev.Flow, State: drovertype.FlowRunning, SubmittedAt: ev.Time, Order: d.Spec.TopoOrder(), Spec: d.Spec,
		MaxParallel: d.MaxParallel, Publish: d.Publish, RoundPlan: d.RoundPlan}
	s.Flows[f.ID] = f
	s.mark(keyFlow + f.ID)
	s.mark(keyFlowDef + f.ID)
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

// checkSubmitted checks a flow as the controller records it: a spec that
// validates as the submit API validated it, complete (a base, a repo,
// which a project may have supplied), with a plan for every task or for
// none, every runtime a plan names usable as a subject token.
func checkSubmitted(flowID string, d *event.FlowSubmittedData) error {
	if err := d.Spec.Validate(flow.Options{Complete: true, RuntimesResolved: len(d.Plan) > 0}); err != nil {
		return malformed("flow_submitted of flow %s: its spec does not validate: %s", flowID, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if d.Spec.Repo == "" {
		return malformed("flow_submitted of flow %s names no repo", flowID)
	}
	if d.MaxParallel < 0 {
		return malformed("flow_submitted of flow %s with max_parallel %d", flowID, d.MaxParallel)
	}
	if err := checkPublishSubmitted(flowID, d); err != nil {
		return err
	}
	if len(d.Plan) == 0 {
		return nil
	}
	if len(d.Plan) != len(d.Spec.Tasks) {
		return malformed("flow_submitted of flow %s has %d plans for %d tasks", flowID, len(d.Plan), len(d.Spec.Tasks))
	}
	for _, t := range d.Spec.Tasks {
		p, ok := d.Plan[t.ID]
		if !ok {
			return malformed("flow_submitted of flow %s has no plan for task %s", flowID, t.ID)
		}
		names := append([]string{p.Worker.Name}, p.Retry.Fallback...)
		if p.Validator != nil {
			names = append(names, p.Validator.Name)
		}
		for _, n := range names {
			if err := drovertype.ValidID(n); err != nil {
				return malformed("flow_submitted of flow %s: task %s's plan names runtime %.70q: %v", flowID, t.ID, n, err)
			}
		}
	}
	return nil
}

// flowTasksSubmitted keeps a part of a large flow until its flow_submitted.
func (s *State) flowTasksSubmitted(ev *event.Event, d *event.FlowTasksSubmittedData) error {
	if d.Part < 1 || d.Part > flow.MaxTasks {
		return fmt.Errorf("%w: flow_tasks_submitted part %d", event.ErrDecode, d.Part)
	}
	if keyNumber(ev.ID) != d.Part {
		return malformed("flow_tasks_submitted %s carries part %d", ev.ID, d.Part)
	}
	k := partKey(ev.Flow, d.Part)
	if _, ok := s.Flows[ev.Flow]; ok {
		return contradiction("part %d of flow %s after the flow was recorded", d.Part, ev.Flow)
	}
	if s.Parts[k] != nil {
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

// flow returns the flow an event is about, or the contradiction of an event
// about a flow that was never recorded.
func (s *State) flow(ev *event.Event) (*Flow, error) {
	if f := s.Flows[ev.Flow]; f != nil {
		return f, nil
	}
	return nil, contradiction("%s of flow %s, which was never submitted", ev.Type, ev.Flow)
}

// task returns the flow and task an event is about, or the contradiction.
func (s *State) task(ev *event.Event) (*Flow, *Task, error) {
	f, err := s.flow(ev)
	if err != nil {
		return nil, nil, err
	}
	if t := s.Task(ev.Flow, ev.Task); t != nil {
		return f, t, nil
	}
	return nil, nil, contradiction("%s of task %s, which flow %s does not have", ev.Type, ev.Task, ev.Flow)
}

// attempt returns the attempt an event is about, or the contradiction of an
// event about an attempt nobody scheduled.
func (s *State) attempt(ev *event.Event) (*Attempt, error) {
	if a := s.Attempts[ev.Attempt]; a != nil {
		return a, nil
	}
	if _, err := s.flow(ev); err != nil {
		return nil, err
	}
	return nil, contradiction("%s of attempt %s, which was never scheduled", ev.Type, ev.Attempt)
}

func (s *State) flowCompleted(ev *event.Event, d *event.FlowCompletedData) error {
	if !d.State.Terminal() {
		return fmt.Errorf("%w: flow_completed with state %q", event.ErrDecode, d.State)
	}
	if want := drovertype.EventID(event.FlowCompleted, roundKey(ev.Flow, d.Round)); ev.ID != want {
		return malformed("flow_completed %s of round %d, whose id is %s", ev.ID, d.Round, want)
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	switch {
	case f.State.Terminal() || d.Round < f.Round:
		return nil // completed already, or decided before an operator retry reopened it
	case d.Round > f.Round:
		return contradiction("flow_completed of flow %s in round %d; the flow is in round %d", f.ID, d.Round, f.Round)
	}
	// Within a round a task that ended stays ended, an attempt that ended
	// stays ended, and a cancel stays: the controller decided on what
	// holds now.
	for _, t := range s.FlowTasks(f) {
		if !t.State.Terminal() {
			return contradiction("flow_completed of flow %s while its task %s is %s", f.ID, t.ID, t.State)
		}
		if a := s.Attempts[t.Attempt]; a != nil && !a.State.Terminal() {
			return contradiction("flow_completed of flow %s while attempt %s is %s", f.ID, a.ID, a.State)
		}
		if d.State == drovertype.FlowSucceeded && t.State != drovertype.TaskSucceeded {
			return contradiction("flow %s completed as succeeded while its task %s is %s", f.ID, t.ID, t.State)
		}
	}
	switch in := f.Integration; {
	case d.State == drovertype.FlowCancelled && f.Cancel == nil:
		return contradiction("flow %s completed as cancelled, which nobody asked for", f.ID)
	case d.State == drovertype.FlowSucceeded && (in == nil || in.N != f.Round+1 || in.State != drovertype.IntegrationSucceeded):
		return contradiction("flow %s completed as succeeded without its integration branch built", f.ID)
	}
	f.State = d.State
	f.CompletedAt = ev.Time
	if f.PR != nil {
		s.endRound(f, ev.Time)
	}
	s.mark(keyFlow + f.ID)
	return nil
}

// integrationBranchUpTo reports whether b is the integration branch of a
// build of the flow up to n: its own, or an earlier one's (a published
// flow's pull request's branch).
func integrationBranchUpTo(flowID, b string, n int) bool {
	k, ok := drovertype.ParseIntegrationBranch(flowID, b)
	return ok && k <= n
}

// roundKey is what the id of a flow's completion is about in a round.
func roundKey(flowID string, round int) string {
	if round == 0 {
		return flowID
	}
	return fmt.Sprintf("%s:r%d", flowID, round)
}

// checkMerge checks the results a decision merges: tasks of the flow, and
// their result branches, when named.
func checkMerge(ev *event.Event, merge []event.DepResult) error {
	for _, m := range merge {
		if err := drovertype.ValidID(m.Task); err != nil {
			return malformed("%s merges task %.70q: %v", ev.Type, m.Task, err)
		}
		if m.Branch == "" {
			continue
		}
		if task, _, ok := drovertype.ParseAttemptBranch(ev.Flow, m.Branch); !ok || task != m.Task {
			return malformed("%s merges branch %.200q, not a result branch of task %s of flow %s", ev.Type, m.Branch, m.Task, ev.Flow)
		}
	}
	return nil
}

func (s *State) attemptScheduled(ev *event.Event, d *event.AttemptScheduledData) error {
	switch {
	case d.N < 1 || ev.Attempt != drovertype.AttemptID(ev.Flow, ev.Task, d.N):
		return malformed("attempt_scheduled of attempt %s says it is attempt %d", ev.Attempt, d.N)
	case d.Branch != drovertype.AttemptBranch(ev.Flow, ev.Task, d.N):
		return malformed("attempt_scheduled of attempt %s on branch %.200q, not its own", ev.Attempt, d.Branch)
	case drovertype.ValidID(d.Pool) != nil || drovertype.ValidID(d.Runtime) != nil:
		return malformed("attempt_scheduled of attempt %s on pool %.70q, runtime %.70q", ev.Attempt, d.Pool, d.Runtime)
	}
	if err := checkMerge(ev, d.Merge); err != nil {
		return err
	}
	_, t, err := s.task(ev)
	if err != nil {
		return err
	}
	if t.State != drovertype.TaskPending && t.State != drovertype.TaskRetrying {
		return nil // cancelled, or scheduled already, meanwhile
	}
	switch {
	case d.N <= t.Attempts || s.Attempts[ev.Attempt] != nil:
		return nil
	case d.N > t.Attempts+1:
		return contradiction("attempt_scheduled of attempt %d of task %s, whose next attempt is %d", d.N, t.ID, t.Attempts+1)
	}
	a := &Attempt{
		ID: ev.Attempt, Flow: ev.Flow, Task: ev.Task, N: d.N, Runtime: d.Runtime, Model: d.Model, Args: d.Args,
		Pool: d.Pool, Branch: d.Branch, Prompt: d.Prompt, Timeout: d.Timeout, Merge: d.Merge,
		State: drovertype.AttemptScheduled, ScheduledAt: ev.Time,
	}
	if p := s.Placements[event.PlacementKey(d.Pool, d.Runtime)]; p != nil {
		a.UnservedBeforeMS = p.UnservedBy(ev.Time).Milliseconds()
	}
	s.Attempts[a.ID] = a
	s.touchAttempt(a)
	s.probe(a, d.Probe)
	t.State, t.Attempts, t.Attempt, t.Retry = drovertype.TaskScheduled, d.N, a.ID, nil
	s.touchTask(t, ev)
	return nil
}

func (s *State) attemptClaimed(ev *event.Event, d *event.AttemptClaimedData) error {
	if err := drovertype.ValidID(d.Worker); err != nil {
		return malformed("attempt_claimed of %s by worker %.70q: %v", ev.Attempt, d.Worker, err)
	}
	if ev.Task == "" {
		return s.buildClaimed(ev)
	}
	a, err := s.attempt(ev)
	if err != nil {
		return err
	}
	if a.State.Terminal() {
		return nil // claimed by a worker that had not heard it ended
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

// buildClaimed checks the claim of a build of the integration branch, which
// the fold keeps nothing of: it must be of a build that was scheduled.
func (s *State) buildClaimed(ev *event.Event) error {
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	_, _, n, _ := drovertype.ParseAttemptID(ev.Attempt)
	if f.Integration == nil || n > f.Integration.N {
		return contradiction("attempt_claimed of integration build %d of flow %s, which was never scheduled", n, f.ID)
	}
	return nil
}

// current returns the open attempt a worker's event is about if the event
// comes from the claim that holds it now; events of a superseded claim are
// fenced off, and nil is returned for an attempt that has ended. An event
// from a claim the fold never saw is a contradiction: a worker publishes
// attempt_claimed before anything else of its claim.
func (s *State) current(ev *event.Event) (*Attempt, error) {
	a, err := s.attempt(ev)
	if err != nil || a.State.Terminal() {
		return nil, err
	}
	switch {
	case ev.Epoch > a.Epoch:
		return nil, contradiction("%s of attempt %s at epoch %d, whose claim at that epoch was never recorded (it is at epoch %d)",
			ev.Type, a.ID, ev.Epoch, a.Epoch)
	case ev.Epoch < a.Epoch:
		a.Fenced++
		s.touchAttempt(a)
		return nil, nil
	}
	return a, nil
}

// phase folds a lifecycle event of an attempt, whose payload is a T.
func phase[T any](s *State, ev *event.Event, d *T) error { return s.attemptPhase(ev, d) }

func (s *State) attemptPhase(ev *event.Event, p any) error {
	a, err := s.current(ev)
	if a == nil {
		return err
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
	a, err := s.current(ev)
	if a == nil {
		return err
	}
	if r.Branch != "" && r.Branch != a.Branch {
		// A dependent would merge it: the worker pushes only the
		// attempt's own branch.
		return contradiction("attempt_reported of attempt %s names branch %.200q, not the attempt's own %s", a.ID, r.Branch, a.Branch)
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
	a, err := s.attempt(ev)
	if err != nil {
		return err
	}
	if a.State != drovertype.AttemptFailed {
		return contradiction("runtime_error_classified of attempt %s, which has not failed (%s)", a.ID, a.State)
	}
	info := d.ErrorInfo
	a.Error = &info
	s.touchAttempt(a)
	return nil
}

func (s *State) taskFailed(ev *event.Event, d *event.TaskFailedData) error {
	_, key, _ := drovertype.ParseEventID(ev.ID)
	class, whole := taskEnd(ev, key)
	switch {
	case whole && class != d.Class:
		return malformed("task_failed %s of class %s: that id ends a task with %s", ev.ID, d.Class, class)
	case !whole && d.Class == drovertype.ClassBudgetExceeded:
		return malformed("task_failed %s of class %s: a budget's end of a task has the id <flow>/<task>:budget:r<round>", ev.ID, d.Class)
	}
	_, t, err := s.task(ev)
	if err != nil {
		return err
	}
	if whole {
		if a := s.Attempts[t.Attempt]; d.Class == drovertype.ClassRateLimited && a != nil && !a.State.Terminal() && !t.State.Terminal() {
			// The controller ends a task for waiting out rate limits only
			// while it waits: with no attempt running.
			return contradiction("task_failed %s of task %s, whose attempt %s has not ended", ev.ID, t.ID, a.ID)
		}
		return s.budgetEnded(ev, t, d)
	}
	if ev.Attempt == "" {
		return malformed("task_failed names no attempt")
	}
	a, err := s.attempt(ev)
	if err != nil {
		return err
	}
	if t.State.Terminal() || t.Attempt != a.ID {
		return nil // cancelled meanwhile, or retried since and running another attempt
	}
	if a.State != drovertype.AttemptFailed {
		return contradiction("task_failed of task %s on attempt %s, which has not failed (%s)", t.ID, a.ID, a.State)
	}
	t.State, t.Retry = drovertype.TaskFailed, nil
	t.Error = &event.ErrorInfo{Class: d.Class, Message: d.Reason}
	s.touchTask(t, ev)
	s.blockDependents(ev, t)
	return nil
}

// budgetEnded ends a task its budget no longer covers, or that waited out
// rate limits for its retry.rate_limit_wait. Like a cancel, a budget may
// end a task whose attempt still runs: the controller then stops that
// attempt, or lets it finish, as the budget says.
func (s *State) budgetEnded(ev *event.Event, t *Task, d *event.TaskFailedData) error {
	if t.State.Terminal() {
		return nil
	}
	t.State, t.Retry = drovertype.TaskFailed, nil
	t.Error = &event.ErrorInfo{Class: d.Class, Message: d.Reason}
	s.touchTask(t, ev)
	s.blockDependents(ev, t)
	return nil
}

func (s *State) recoveryScheduled(ev *event.Event, d *event.RuntimeRecoveryScheduledData) error {
	if err := drovertype.ValidID(d.Runtime); err != nil {
		return malformed("runtime_recovery_scheduled of attempt %s on runtime %.70q: %v", ev.Attempt, d.Runtime, err)
	}
	_, t, err := s.task(ev)
	if err != nil {
		return err
	}
	a, err := s.attempt(ev)
	if err != nil {
		return err
	}
	switch {
	case !a.State.Terminal() || a.State == drovertype.AttemptSucceeded:
		// Decided only about a failed attempt, which stays failed.
		return contradiction("runtime_recovery_scheduled of attempt %s, which has not failed (%s)", a.ID, a.State)
	case d.N > t.Attempts+1:
		return contradiction("runtime_recovery_scheduled of attempt %d of task %s, whose next attempt is %d", d.N, t.ID, t.Attempts+1)
	}
	// Only the decision about the task's current, failed attempt counts:
	// an operator may have cancelled and retried the task since.
	if t.State != drovertype.TaskRunning || t.Attempt != a.ID || d.N != t.Attempts+1 || a.State != drovertype.AttemptFailed {
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
	if names := map[string]bool{event.CancelFlow: ev.Task == "" && ev.Attempt == "",
		event.CancelTask: ev.Task != "" && ev.Attempt == "", event.CancelAttempt: ev.Task != "" && ev.Attempt != ""}; !names[d.Scope] {
		return malformed("cancel_requested of scope %s names task %q and attempt %q", d.Scope, ev.Task, ev.Attempt)
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	var t *Task
	switch d.Scope {
	case event.CancelTask:
		_, t, err = s.task(ev)
	case event.CancelAttempt:
		if _, t, err = s.task(ev); err == nil {
			_, err = s.attempt(ev)
		}
	}
	if err != nil {
		return err
	}
	if f.State.Terminal() {
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
	if t.State.Terminal() || (d.Scope == event.CancelAttempt && t.Attempt != ev.Attempt) {
		return nil
	}
	t.CancelRequested = true
	s.touchTask(t, ev)
	return nil
}

func (s *State) taskCancelled(ev *event.Event, d *event.TaskCancelledData) error {
	f, t, err := s.task(ev)
	if err != nil {
		return err
	}
	if t.State.Terminal() || keyNumber(ev.ID) != t.Round {
		return nil // ended meanwhile, or decided in a round an operator retry has closed
	}
	if f.Cancel == nil && !t.CancelRequested {
		return contradiction("task_cancelled of task %s, which nobody asked to cancel", t.ID)
	}
	t.State, t.Retry = drovertype.TaskCancelled, nil
	t.Error = &event.ErrorInfo{Class: drovertype.ClassCancelled, Message: d.Reason}
	s.touchTask(t, ev)
	s.blockDependents(ev, t)
	return nil
}

func (s *State) attemptAbandoned(ev *event.Event, d *event.AttemptAbandonedData) error {
	a, err := s.attempt(ev)
	if err != nil || a.State.Terminal() {
		return err
	}
	// The controller revokes only the live attempt of a cancelled task (or
	// of one its budget ended), and such a task is retried only once its
	// attempt has ended.
	if t := s.Task(a.Flow, a.Task); t == nil || t.Attempt != a.ID || !stopped(t) {
		return contradiction("attempt_abandoned of attempt %s, whose task is not cancelled", a.ID)
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
	a, err := s.attempt(ev)
	if err != nil || a.State.Terminal() {
		return err
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
	f, err := s.flow(ev)
	if err != nil || f.State.Terminal() {
		return err
	}
	f.Paused = ev.Type == event.FlowPaused
	s.mark(keyFlow + f.ID)
	return nil
}

// retryRequested reopens a failed or cancelled task (and its flow, if it had
// finished): the task is pending again with a fresh retry budget, and the
// tasks it blocked wait for it again.
func (s *State) retryRequested(ev *event.Event, _ *event.OperatorData) error {
	f, t, err := s.task(ev)
	if err != nil {
		return err
	}
	if f.Cancel != nil {
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
	switch {
	case d.N < 1 || keyNumber(ev.ID) != d.N:
		return malformed("integration_scheduled %s says it is build %d", ev.ID, d.N)
	case !integrationBranchUpTo(ev.Flow, d.Branch, d.N) || d.Base != "" && d.Base != d.Branch:
		return malformed("integration_scheduled of build %d of flow %s on branch %.200q from %.200q, not its own", d.N, ev.Flow, d.Branch, d.Base)
	case drovertype.ValidID(d.Pool) != nil || drovertype.ValidID(d.Runtime) != nil:
		return malformed("integration_scheduled of flow %s on pool %.70q, runtime %.70q", ev.Flow, d.Pool, d.Runtime)
	}
	if err := checkMerge(ev, d.Merge); err != nil {
		return err
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	switch {
	case f.State.Terminal() || d.N < f.Round+1 || f.Integration != nil && f.Integration.N >= d.N:
		return nil // decided before an operator retry reopened the flow, or scheduled already
	case d.N > f.Round+1:
		return contradiction("integration_scheduled of build %d of flow %s, in round %d", d.N, f.ID, f.Round)
	case d.Branch != drovertype.IntegrationBranch(ev.Flow, d.N) && (f.PR == nil || f.PR.Number == 0 || d.Branch != f.PR.Head):
		// An earlier build's branch is the pull request's: later builds
		// start from it and push to it.
		return contradiction("integration_scheduled of build %d of flow %s on %s, which is not its pull request's branch", d.N, f.ID, d.Branch)
	case d.Branch != drovertype.IntegrationBranch(ev.Flow, d.N) && d.Base != d.Branch:
		return contradiction("integration_scheduled of build %d of flow %s on its pull request's branch %s from %q: it starts from that branch", d.N, f.ID, d.Branch, d.Base)
	}
	var merge []event.DepResult
	for _, t := range s.FlowTasks(f) {
		// Within a round, what has ended stays ended (see flowCompleted).
		if !t.State.Terminal() {
			return contradiction("integration_scheduled of flow %s while its task %s is %s", f.ID, t.ID, t.State)
		}
		if t.State == drovertype.TaskSucceeded {
			merge = append(merge, event.DepResult{Task: t.ID, Branch: t.ResultBranch, Commit: t.ResultCommit})
		}
	}
	if len(merge) == 0 {
		return contradiction("integration_scheduled of flow %s, none of whose tasks succeeded", f.ID)
	}
	if len(d.Merge) > 0 {
		// The controller names no tasks (a flow may have thousands): the
		// integration merges the flow's succeeded tasks in order, as they
		// are now, as they were when it was decided.
		merge = d.Merge
	}
	f.Integration = &Integration{N: d.N, State: drovertype.IntegrationScheduled, Branch: d.Branch, Runtime: d.Runtime,
		Pool: d.Pool, Merge: merge, Base: d.Base}
	s.mark(keyFlow + f.ID)
	return nil
}

func (s *State) flowIntegrated(ev *event.Event, d *event.FlowIntegratedData) error {
	switch {
	case d.N < 1 || ev.Attempt != drovertype.IntegrationID(ev.Flow, d.N):
		return malformed("flow_integrated of %s says it is build %d", ev.Attempt, d.N)
	case !integrationBranchUpTo(ev.Flow, d.Branch, d.N):
		return malformed("flow_integrated of build %d of flow %s on branch %.200q, not its own", d.N, ev.Flow, d.Branch)
	}
	f, err := s.flow(ev)
	if err != nil {
		return err
	}
	switch in := f.Integration; {
	case in == nil || d.N > in.N:
		return contradiction("flow_integrated of build %d of flow %s, which was never scheduled", d.N, f.ID)
	case in.N == d.N && in.Branch != d.Branch:
		return contradiction("flow_integrated of build %d of flow %s on %s; it was scheduled on %s", d.N, f.ID, d.Branch, in.Branch)
	case in.N != d.N || in.State != drovertype.IntegrationScheduled:
		return nil // an older build, or this one reported by another claim already
	}
	in := f.Integration
	in.State, in.Commit, in.Error = drovertype.IntegrationSucceeded, d.Commit, d.Error
	if d.Error != nil {
		in.State = drovertype.IntegrationFailed
	} else if f.PR != nil && f.PR.Number > 0 && in.Branch == f.PR.Head {
		f.PR.merged(in.Merge)
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
	// Only what is downstream of the failed task can be blocked by it, and
	// it comes dependencies first, so one pass reaches every descendant.
	bad := map[string]string{failed.ID: failed.ID}
	for _, id := range s.dependentsOf(f).below(failed.ID) {
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

// stopped reports whether t ended in a way that stops its running attempt:
// cancelled, or failed because its budget was reached.
func stopped(t *Task) bool {
	return t.State == drovertype.TaskCancelled ||
		t.State == drovertype.TaskFailed && t.Error != nil && t.Error.Class == drovertype.ClassBudgetExceeded
}
