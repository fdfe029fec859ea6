package foldtest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/flow"
)

// A Scenario is the events of some flows as a partial order: each node may
// only be published after the nodes it depends on (the previous event of the
// same attempt, the reports a decision waits for). Any topological order is
// a stream the controller and workers could have produced.
type Scenario struct {
	Nodes []Node
}

// A Node is one message of a scenario and the nodes it comes after.
type Node struct {
	Raw  []byte
	Ev   *event.Event // nil for a message that is not an event
	Deps []int
}

// Add appends an event that depends on deps and returns its index.
func (sc *Scenario) Add(tb testing.TB, deps []int, id string, typ event.Type, at time.Time, flowID, task, attempt string, epoch uint64, data any) int {
	tb.Helper()
	ev, err := event.New(id, typ, at, flowID, task, attempt, epoch, data)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := ev.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	sc.Nodes = append(sc.Nodes, Node{Raw: raw, Ev: ev, Deps: deps})
	return len(sc.Nodes) - 1
}

// AddRaw appends a message that is not an event, depending on nothing.
func (sc *Scenario) AddRaw(raw string) {
	sc.Nodes = append(sc.Nodes, Node{Raw: []byte(raw)})
}

// DiamondOpts says how a diamond flow goes.
type DiamondOpts struct {
	FailA     bool // a's attempt fails: a failed, c and d blocked, flow failed
	Prompt    int  // bytes of prompt per task, to make the records bigger
	TakeoverB bool // b's first worker is superseded and keeps writing
	BadPhase  bool // a's worker writes a runtime_started with a broken payload
}

// AddDiamond adds a diamond flow (a, b; c after both; d after c), every
// event stamped with a fixed time so that any order folds to the same
// records.
func (sc *Scenario) AddDiamond(tb testing.TB, fid string, o DiamondOpts) {
	tb.Helper()
	clock := 0
	at := func() time.Time { clock++; return BaseTime.Add(time.Duration(clock) * time.Second) }
	pad := strings.Repeat(".", o.Prompt)
	spec := flow.Spec{Name: fid, Repo: "/r", Base: "HEAD", Runtime: "demo", Tasks: []flow.Task{
		{ID: "a", Prompt: "a" + pad}, {ID: "b", Prompt: "b" + pad},
		{ID: "c", Prompt: "c" + pad, DependsOn: []string{"a", "b"}},
		{ID: "d", Prompt: "d" + pad, DependsOn: []string{"c"}},
	}}
	submit := sc.Add(tb, nil, drovertype.EventID(event.FlowSubmitted, fid), event.FlowSubmitted, at(), fid, "", "", 0, event.FlowSubmittedData{Spec: spec})

	attemptID := func(task string) string { return drovertype.AttemptID(fid, task, 1) }
	schedule := func(task string, deps []int, merge []event.DepResult) int {
		id := attemptID(task)
		return sc.Add(tb, deps, drovertype.EventID(event.AttemptScheduled, id), event.AttemptScheduled, at(), fid, task, id, 0, event.AttemptScheduledData{
			N: 1, Runtime: "demo", Pool: "default", Branch: drovertype.AttemptBranch(fid, task, 1), Merge: merge,
		})
	}
	// worker adds the events of one claim, each after the previous one.
	worker := func(task string, epoch uint64, prev int, success bool, commit string) int {
		id := attemptID(task)
		w := func(typ event.Type, data any) {
			prev = sc.Add(tb, []int{prev}, drovertype.ClaimEventID(typ, id, epoch), typ, at(), fid, task, id, epoch, data)
		}
		w(event.AttemptClaimed, event.AttemptClaimedData{Worker: fmt.Sprintf("w%d", epoch)})
		w(event.AdapterInitialized, event.AdapterInitializedData{Adapter: "demo", Binary: "/bin/demo"})
		w(event.PrepareCompleted, event.PrepareCompletedData{Worktree: "/wt/" + id, Branch: "b", BaseCommit: "base", Baseline: "base"})
		if o.BadPhase && task == "a" {
			// Poison under the id of the good one that follows: poison
			// marks no id seen.
			prev = sc.Add(tb, []int{prev}, drovertype.ClaimEventID(event.RuntimeStarted, id, epoch), event.RuntimeStarted, at(), fid, task, id, epoch, map[string]any{"pid": "nope"})
		}
		w(event.RuntimeStarted, event.RuntimeStartedData{Pid: 100 + int(epoch), Argv: []string{"demo"}})
		w(event.RuntimeExited, event.RuntimeExitedData{Outcome: "exited", DurationMS: 5})
		w(event.DiffComputed, event.DiffComputedData{Stat: "1 file changed", DiffBytes: 10})
		w(event.RuntimeTerminated, struct{}{})
		rep := event.Report{Success: success, Branch: drovertype.AttemptBranch(fid, task, 1), Commit: commit}
		if !success {
			rep.ExitCode = 1
			rep.Error = &event.ErrorInfo{Class: drovertype.ClassRuntimeError, Message: "exit 1"}
		}
		w(event.AttemptReported, rep)
		return prev
	}

	schedA := schedule("a", []int{submit}, nil)
	repA := worker("a", 1, schedA, !o.FailA, "ca")
	schedB := schedule("b", []int{submit}, nil)
	var repB int
	if o.TakeoverB {
		// Worker 1 claims and starts; worker 2 takes over; worker 1's
		// remaining events (fenced) and worker 2's are each in order, and
		// worker 1's come after the takeover only where they depend on it.
		id := attemptID("b")
		claim1 := sc.Add(tb, []int{schedB}, drovertype.ClaimEventID(event.AttemptClaimed, id, 1), event.AttemptClaimed, at(), fid, "b", id, 1, event.AttemptClaimedData{Worker: "old"})
		prep1 := sc.Add(tb, []int{claim1}, drovertype.ClaimEventID(event.PrepareCompleted, id, 1), event.PrepareCompleted, at(), fid, "b", id, 1, event.PrepareCompletedData{Worktree: "/wt/old"})
		claim2 := sc.Add(tb, []int{prep1}, drovertype.ClaimEventID(event.AttemptClaimed, id, 2), event.AttemptClaimed, at(), fid, "b", id, 2, event.AttemptClaimedData{Worker: "new"})
		late := sc.Add(tb, []int{claim2}, drovertype.ClaimEventID(event.RuntimeStarted, id, 1), event.RuntimeStarted, at(), fid, "b", id, 1, event.RuntimeStartedData{Pid: 1})
		lateRep := sc.Add(tb, []int{late}, drovertype.ClaimEventID(event.AttemptReported, id, 1), event.AttemptReported, at(), fid, "b", id, 1, event.Report{Success: true, Commit: "stale"})
		prep2 := sc.Add(tb, []int{claim2}, drovertype.ClaimEventID(event.PrepareCompleted, id, 2), event.PrepareCompleted, at(), fid, "b", id, 2, event.PrepareCompletedData{Worktree: "/wt/new"})
		// The good report waits for the stale one so that the stale one is
		// fenced (rather than ignored as late) in every order.
		repB = sc.Add(tb, []int{prep2, lateRep}, drovertype.ClaimEventID(event.AttemptReported, id, 2), event.AttemptReported, at(), fid, "b", id, 2, event.Report{Success: true, Branch: drovertype.AttemptBranch(fid, "b", 1), Commit: "cb"})
	} else {
		repB = worker("b", 1, schedB, true, "cb")
	}

	if o.FailA {
		id := attemptID("a")
		cls := sc.Add(tb, []int{repA}, drovertype.EventID(event.RuntimeErrorClassified, id), event.RuntimeErrorClassified, at(), fid, "a", id, 0, event.RuntimeErrorClassifiedData{ErrorInfo: event.ErrorInfo{Class: drovertype.ClassRuntimeError, Message: "exit 1"}})
		failed := sc.Add(tb, []int{cls}, drovertype.EventID(event.TaskFailed, id), event.TaskFailed, at(), fid, "a", id, 0, event.TaskFailedData{Reason: "attempt 1 failed", Class: drovertype.ClassRuntimeError})
		sc.Add(tb, []int{failed, repB}, drovertype.EventID(event.FlowCompleted, fid), event.FlowCompleted, at(), fid, "", "", 0, event.FlowCompletedData{State: drovertype.FlowFailed})
		return
	}
	schedC := schedule("c", []int{repA, repB}, []event.DepResult{{Task: "a", Commit: "ca"}, {Task: "b", Commit: "cb"}})
	repC := worker("c", 1, schedC, true, "cc")
	schedD := schedule("d", []int{repC}, []event.DepResult{{Task: "c", Commit: "cc"}})
	repD := worker("d", 1, schedD, true, "cd")
	built := integrate(tb, sc, []int{repD}, fid, 1, at, nil)
	sc.Add(tb, []int{built}, drovertype.EventID(event.FlowCompleted, fid), event.FlowCompleted, at(), fid, "", "", 0, event.FlowCompletedData{State: drovertype.FlowSucceeded})
}

// StandardScenario is a few flows covering success, failure, takeover and
// (with poison) broken messages.
func StandardScenario(tb testing.TB, poison bool) *Scenario {
	sc := &Scenario{}
	sc.AddStandard(tb, "", poison, 0)
	return sc
}

func (sc *Scenario) AddStandard(tb testing.TB, suffix string, poison bool, prompt int) {
	sc.AddDiamond(tb, "ok"+suffix, DiamondOpts{Prompt: prompt})
	sc.AddDiamond(tb, "fail"+suffix, DiamondOpts{FailA: true, Prompt: prompt})
	sc.AddDiamond(tb, "takeover"+suffix, DiamondOpts{TakeoverB: true, BadPhase: poison, Prompt: prompt})
	if poison {
		sc.AddRaw("not json")
		sc.AddRaw(`{"v":2,"id":"future","type":"flow_submitted","flow":"x"}`)
		sc.AddRaw(`{"v":1,"id":"newer-type` + suffix + `","type":"task_paused","flow":"ok"}`)
	}
}

// Order returns the nodes in their order of addition: a valid topological
// order, since every node is added after its dependencies.
func (sc *Scenario) Order() []int {
	out := make([]int, len(sc.Nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// RandomOrder returns a random topological order of the nodes.
func (sc *Scenario) RandomOrder(rng *rand.Rand) []int {
	waiting := make([]int, len(sc.Nodes)) // unmet dependencies
	dependents := make([][]int, len(sc.Nodes))
	var ready []int
	for i, n := range sc.Nodes {
		waiting[i] = len(n.Deps)
		for _, d := range n.Deps {
			dependents[d] = append(dependents[d], i)
		}
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	out := make([]int, 0, len(sc.Nodes))
	for len(ready) > 0 {
		k := rng.IntN(len(ready))
		i := ready[k]
		ready[k] = ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		out = append(out, i)
		for _, j := range dependents[i] {
			if waiting[j]--; waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if len(out) != len(sc.Nodes) {
		panic("Scenario has a cycle")
	}
	return out
}

// Delivery is one Message handed to Store.Stage, and whether a Commit
// follows it.
type Delivery struct {
	Seq    uint64
	Raw    []byte
	Commit bool
}

// NoisyStream publishes the nodes in a random valid order, republishing some
// events later on (same id; sometimes the bytes differ, as when the
// controller re-decides with a fresh clock), and has the consumer redeliver
// some sequences already folded. It returns the stream (sequence -> Message)
// and the deliveries in order, with random commit points.
func (sc *Scenario) NoisyStream(rng *rand.Rand) (map[uint64][]byte, []Delivery) {
	stream := map[uint64][]byte{}
	var out []Delivery
	var seq uint64
	var published []int // nodes published so far, for republishing
	publish := func(raw []byte) {
		seq++
		stream[seq] = raw
		out = append(out, Delivery{Seq: seq, Raw: raw, Commit: rng.IntN(4) == 0})
	}
	for _, i := range sc.RandomOrder(rng) {
		publish(sc.Nodes[i].Raw)
		if sc.Nodes[i].Ev != nil {
			published = append(published, i)
		}
		if rng.IntN(5) == 0 && len(published) > 0 {
			n := sc.Nodes[published[rng.IntN(len(published))]]
			raw := n.Raw
			if rng.IntN(2) == 0 {
				ev := *n.Ev
				ev.Time = ev.Time.Add(time.Hour)
				var err error
				if raw, err = ev.Encode(); err != nil {
					panic(err)
				}
			}
			publish(raw)
		}
		if rng.IntN(6) == 0 {
			old := uint64(rng.IntN(int(seq))) + 1
			out = append(out, Delivery{Seq: old, Raw: stream[old]})
		}
	}
	out[len(out)-1].Commit = true
	return stream, out
}

// CleanStream publishes the nodes once each, in order of addition.
func (sc *Scenario) CleanStream() map[uint64][]byte {
	stream := map[uint64][]byte{}
	for k, i := range sc.Order() {
		stream[uint64(k+1)] = sc.Nodes[i].Raw
	}
	return stream
}

// FlowBuilder adds the events of one flow to a Scenario, each stamped with
// the flow's own clock (one second per event, in order of addition) so that
// any order folds to the same records.
type FlowBuilder struct {
	sc    *Scenario
	tb    testing.TB
	fid   string
	clock int
}

func (sc *Scenario) Flow(tb testing.TB, fid string) *FlowBuilder {
	return &FlowBuilder{sc: sc, tb: tb, fid: fid}
}

// add adds one event of the flow after deps.
func (b *FlowBuilder) add(deps []int, id string, typ event.Type, task, attempt string, epoch uint64, data any) int {
	b.tb.Helper()
	b.clock++
	return b.sc.Add(b.tb, deps, id, typ, BaseTime.Add(time.Duration(b.clock)*time.Second), b.fid, task, attempt, epoch, data)
}

func (b *FlowBuilder) attemptID(task string, n int) string {
	return drovertype.AttemptID(b.fid, task, n)
}

func (b *FlowBuilder) branch(task string, n int) string {
	return drovertype.AttemptBranch(b.fid, task, n)
}

func (b *FlowBuilder) submit(tasks ...flow.Task) int {
	spec := flow.Spec{Name: b.fid, Repo: "/r", Base: "HEAD", Runtime: "demo", Tasks: tasks}
	return b.add(nil, drovertype.EventID(event.FlowSubmitted, b.fid), event.FlowSubmitted, "", "", 0, event.FlowSubmittedData{Spec: spec, MaxParallel: 2})
}

// schedule adds attempt n of task; d carries what differs from the defaults.
func (b *FlowBuilder) schedule(deps []int, task string, n int, d event.AttemptScheduledData) int {
	id := b.attemptID(task, n)
	d.N, d.Pool, d.Branch = n, "default", b.branch(task, n)
	if d.Runtime == "" {
		d.Runtime = "demo"
	}
	return b.add(deps, drovertype.EventID(event.AttemptScheduled, id), event.AttemptScheduled, task, id, 0, d)
}

// run adds one claim of attempt n of task, each event after the one before:
// claimed, started, verified when ver is set, and (unless rep is nil)
// reported. It returns the last one.
func (b *FlowBuilder) run(prev int, task string, n int, epoch uint64, ver *event.Verification, rep *event.Report) int {
	id := b.attemptID(task, n)
	w := func(typ event.Type, data any) {
		prev = b.add([]int{prev}, drovertype.ClaimEventID(typ, id, epoch), typ, task, id, epoch, data)
	}
	w(event.AttemptClaimed, event.AttemptClaimedData{Worker: fmt.Sprintf("w%d", epoch)})
	w(event.RuntimeStarted, event.RuntimeStartedData{Pid: 100 + n, Argv: []string{"demo"}})
	if ver != nil {
		w(event.VerificationCompleted, ver)
	}
	if rep != nil {
		w(event.AttemptReported, rep)
	}
	return prev
}

func (b *FlowBuilder) success(task string, n int, commit string) *event.Report {
	return &event.Report{Success: true, Branch: b.branch(task, n), Commit: commit}
}

func failure(class drovertype.ErrorClass) *event.Report {
	return &event.Report{ExitCode: 1, Error: &event.ErrorInfo{Class: class, Message: "it broke"}}
}

// fail adds the controller's classification of attempt n's failure and its
// decision that the task failed.
func (b *FlowBuilder) fail(deps []int, task string, n int, class drovertype.ErrorClass) int {
	id := b.attemptID(task, n)
	cls := b.add(deps, drovertype.EventID(event.RuntimeErrorClassified, id), event.RuntimeErrorClassified, task, id, 0,
		event.RuntimeErrorClassifiedData{ErrorInfo: event.ErrorInfo{Class: class, Message: "it broke"}})
	return b.add([]int{cls}, drovertype.EventID(event.TaskFailed, id), event.TaskFailed, task, id, 0, event.TaskFailedData{Reason: "gave up", Class: class})
}

// integrate adds integration n of the flow and its result, and the flow's
// completion (round n-1) after it.
func (b *FlowBuilder) integrate(deps []int, n int, state drovertype.FlowState, merge ...event.DepResult) int {
	done := integrate(b.tb, b.sc, deps, b.fid, n, func() time.Time { b.clock++; return BaseTime.Add(time.Duration(b.clock) * time.Second) }, merge)
	return b.complete([]int{done}, n-1, state)
}

// integrate adds the controller's integration_scheduled of build n of a
// flow, and a worker's flow_integrated of it at epoch 1.
func integrate(tb testing.TB, sc *Scenario, deps []int, fid string, n int, at func() time.Time, merge []event.DepResult) int {
	branch := drovertype.IntegrationBranch(fid, n)
	sched := sc.Add(tb, deps, drovertype.EventID(event.IntegrationScheduled, fmt.Sprintf("%s:%d", fid, n)), event.IntegrationScheduled, at(),
		fid, "", "", 0, event.IntegrationScheduledData{N: n, Branch: branch, Runtime: "demo", Pool: "default", Merge: merge})
	build := drovertype.IntegrationID(fid, n)
	return sc.Add(tb, []int{sched}, drovertype.ClaimEventID(event.FlowIntegrated, build, 1), event.FlowIntegrated, at(),
		fid, "", build, 1, event.FlowIntegratedData{N: n, Branch: branch, Commit: fmt.Sprintf("i%d", n)})
}

func (b *FlowBuilder) complete(deps []int, round int, state drovertype.FlowState) int {
	key := b.fid
	if round > 0 {
		key = fmt.Sprintf("%s:r%d", key, round) // a round's, as the controller keys it
	}
	return b.add(deps, drovertype.EventID(event.FlowCompleted, key), event.FlowCompleted, "", "", 0, event.FlowCompletedData{State: state, Round: round})
}

// AddPolicyFlows adds flows that go through the policy and operator
// events: a retry on a fallback runtime, a flow cancel, and operator
// retries of a finished flow with a pause between.
func (sc *Scenario) AddPolicyFlows(tb testing.TB, suffix string) {
	tb.Helper()
	pass := &event.Verification{Passed: true, Commands: []event.CommandResult{{Command: "make test", DurationMS: 5}}}

	// fallback: a's first attempt is rate limited; the policy retries it on
	// codex with the feedback in its prompt; b runs after it.
	//   a --> b
	{
		b := sc.Flow(tb, "fallback"+suffix)
		s := b.submit(flow.Task{ID: "a", Prompt: "a"}, flow.Task{ID: "b", Prompt: "b", DependsOn: []string{"a"}})
		// The operator pauses the flow before anything starts, then resumes it.
		pause := b.add([]int{s}, drovertype.EventID(event.FlowPaused, b.fid), event.FlowPaused, "", "", 0, event.OperatorData{Reason: "wait"})
		resume := b.add([]int{pause}, drovertype.EventID(event.FlowResumed, b.fid), event.FlowResumed, "", "", 0, event.OperatorData{})
		rep := b.run(b.schedule([]int{resume}, "a", 1, event.AttemptScheduledData{}), "a", 1, 1, nil, failure(drovertype.ClassRateLimited))
		a1 := b.attemptID("a", 1)
		cls := b.add([]int{rep}, drovertype.EventID(event.RuntimeErrorClassified, a1), event.RuntimeErrorClassified, "a", a1, 0,
			event.RuntimeErrorClassifiedData{ErrorInfo: event.ErrorInfo{Class: drovertype.ClassRateLimited, Message: "429", Recoverable: true}})
		rec := b.add([]int{cls}, drovertype.EventID(event.RuntimeRecoveryScheduled, a1), event.RuntimeRecoveryScheduled, "a", a1, 0, event.RuntimeRecoveryScheduledData{
			Strategy: drovertype.StrategyFallback, N: 2, Runtime: "codex", DelayMS: 1000, DueAt: BaseTime.Add(time.Hour), Reason: "rate limited",
		})
		sched := b.schedule([]int{rec}, "a", 2, event.AttemptScheduledData{Runtime: "codex", Prompt: "a\n\nattempt 1 was rate limited"})
		repA := b.run(sched, "a", 2, 1, pass, b.success("a", 2, "ca"))
		merge := []event.DepResult{{Task: "a", Branch: b.branch("a", 2), Commit: "ca"}}
		repB := b.run(b.schedule([]int{repA}, "b", 1, event.AttemptScheduledData{Merge: merge}), "b", 1, 1, pass, b.success("b", 1, "cb"))
		b.integrate([]int{repB}, 1, drovertype.FlowSucceeded, merge[0], event.DepResult{Task: "b", Branch: b.branch("b", 1), Commit: "cb"})
	}

	// cancel: the flow is cancelled while a runs and b's attempt is queued.
	// The controller cancels a, b and c in one pass (c's is ignored: a's
	// blocked it), abandons b's attempt, and a's worker reports CANCELLED.
	//   a   b
	//    \ /
	//     c
	{
		b := sc.Flow(tb, "cancel"+suffix)
		s := b.submit(flow.Task{ID: "a", Prompt: "a"}, flow.Task{ID: "b", Prompt: "b"},
			flow.Task{ID: "c", Prompt: "c", DependsOn: []string{"a", "b"}})
		schedA := b.schedule([]int{s}, "a", 1, event.AttemptScheduledData{})
		schedB := b.schedule([]int{s}, "b", 1, event.AttemptScheduledData{})
		started := b.run(schedA, "a", 1, 1, nil, nil)
		cancel := b.add([]int{schedA, schedB}, drovertype.EventID(event.CancelRequested, b.fid), event.CancelRequested, "", "", 0,
			event.CancelRequestedData{Scope: event.CancelFlow, Reason: "stop"})
		// A second request keeps the first.
		b.add([]int{cancel}, drovertype.EventID(event.CancelRequested, b.fid+":again"), event.CancelRequested, "", "", 0, event.CancelRequestedData{Scope: event.CancelFlow, Reason: "again"})
		prev := cancel
		cancelled := map[string]int{}
		for _, task := range []string{"a", "b", "c"} {
			attempt := ""
			if task != "c" {
				attempt = b.attemptID(task, 1)
			}
			prev = b.add([]int{prev}, drovertype.EventID(event.TaskCancelled, fmt.Sprintf("%s/%s:%d", b.fid, task, 0)), event.TaskCancelled, task, attempt, 0,
				event.TaskCancelledData{Reason: "cancelled by the operator: stop"})
			cancelled[task] = prev
		}
		a1, b1 := b.attemptID("a", 1), b.attemptID("b", 1)
		abandoned := b.add([]int{cancelled["b"]}, drovertype.EventID(event.AttemptAbandoned, b1), event.AttemptAbandoned, "b", b1, 0,
			event.AttemptAbandonedData{Reason: "cancelled before a worker ran it"})
		term := b.add([]int{started, cancelled["a"]}, drovertype.ClaimEventID(event.RuntimeTerminated, a1, 1), event.RuntimeTerminated, "a", a1, 1, struct{}{})
		rep := b.add([]int{term}, drovertype.ClaimEventID(event.AttemptReported, a1, 1), event.AttemptReported, "a", a1, 1,
			event.Report{ExitCode: -1, Signal: "SIGTERM", Error: &event.ErrorInfo{Class: drovertype.ClassCancelled, Message: "cancelled"}})
		b.complete([]int{rep, abandoned, prev}, 0, drovertype.FlowCancelled)
	}

	// reopen: a fails, then b (which blocks m); w is blocked by a. The flow
	// ends failed, f's result integrated. The operator retries a (round 1:
	// w now waits on b, through m), then b (round 2), and the flow succeeds.
	//   a   b   f
	//   |   |
	//   |   m
	//    \ /
	//     w
	{
		b := sc.Flow(tb, "reopen"+suffix)
		s := b.submit(flow.Task{ID: "a", Prompt: "a"}, flow.Task{ID: "b", Prompt: "b"}, flow.Task{ID: "f", Prompt: "f"},
			flow.Task{ID: "m", Prompt: "m", DependsOn: []string{"b"}}, flow.Task{ID: "w", Prompt: "w", DependsOn: []string{"a", "m"}})
		repA := b.run(b.schedule([]int{s}, "a", 1, event.AttemptScheduledData{}), "a", 1, 1, nil, failure(drovertype.ClassRuntimeError))
		repB := b.run(b.schedule([]int{s}, "b", 1, event.AttemptScheduledData{}), "b", 1, 1, nil, failure(drovertype.ClassRuntimeError))
		repF := b.run(b.schedule([]int{s}, "f", 1, event.AttemptScheduledData{}), "f", 1, 1, nil, b.success("f", 1, "cf"))
		failedA := b.fail([]int{repA}, "a", 1, drovertype.ClassRuntimeError)
		failedB := b.fail([]int{repB, failedA}, "b", 1, drovertype.ClassRuntimeError)
		rf := event.DepResult{Task: "f", Branch: b.branch("f", 1), Commit: "cf"}
		done := b.integrate([]int{failedB, repF}, 1, drovertype.FlowFailed, rf)

		retryA := b.add([]int{done}, drovertype.EventID(event.TaskRetryRequested, b.fid+"/a"), event.TaskRetryRequested, "a", "", 0, event.OperatorData{})
		pause := b.add([]int{retryA}, drovertype.EventID(event.FlowPaused, b.fid), event.FlowPaused, "", "", 0, event.OperatorData{})
		resume := b.add([]int{pause}, drovertype.EventID(event.FlowResumed, b.fid), event.FlowResumed, "", "", 0, event.OperatorData{})
		repA = b.run(b.schedule([]int{resume}, "a", 2, event.AttemptScheduledData{}), "a", 2, 1, nil, b.success("a", 2, "ca"))
		ra := event.DepResult{Task: "a", Branch: b.branch("a", 2), Commit: "ca"}
		done = b.integrate([]int{repA}, 2, drovertype.FlowFailed, ra, rf)

		retryB := b.add([]int{done}, drovertype.EventID(event.TaskRetryRequested, b.fid+"/b"), event.TaskRetryRequested, "b", "", 0, event.OperatorData{})
		repB = b.run(b.schedule([]int{retryB}, "b", 2, event.AttemptScheduledData{}), "b", 2, 1, nil, b.success("b", 2, "cb"))
		rb := event.DepResult{Task: "b", Branch: b.branch("b", 2), Commit: "cb"}
		repM := b.run(b.schedule([]int{repB}, "m", 1, event.AttemptScheduledData{Merge: []event.DepResult{rb}}), "m", 1, 1, pass, b.success("m", 1, "cm"))
		rm := event.DepResult{Task: "m", Branch: b.branch("m", 1), Commit: "cm"}
		repW := b.run(b.schedule([]int{repM}, "w", 1, event.AttemptScheduledData{Merge: []event.DepResult{ra, rm}}), "w", 1, 1, pass, b.success("w", 1, "cw"))
		b.integrate([]int{repW}, 3, drovertype.FlowSucceeded, ra, rb, rf, rm, event.DepResult{Task: "w", Branch: b.branch("w", 1), Commit: "cw"})
	}
}
