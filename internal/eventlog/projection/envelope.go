package projection

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Poison reasons beyond an undecodable message (event.ErrDecode) say which
// rule an event broke; doc.go tells them apart from events that are merely
// stale.
var (
	// ErrMalformed is an event that disagrees with itself: its subject,
	// its ids and its payload do not describe one event as Drover writes
	// it.
	ErrMalformed = errors.New("projection: malformed event")
	// ErrContradiction is a well-formed event that no writer could have
	// written after what the projection holds: about a flow, task or
	// attempt that was never recorded, or an end nothing led to.
	ErrContradiction = errors.New("projection: event contradicts the projection")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func contradiction(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrContradiction, fmt.Sprintf(format, args...))
}

// about is what an event of a type is about, and so which of the
// envelope's task, attempt and epoch it carries.
type about int

const (
	aboutFlow             about = iota // the flow alone: no task, attempt or epoch
	aboutTask                          // a task: no attempt, no epoch
	aboutTaskMaybeAttempt              // a task, and its current attempt if it has one
	aboutAttempt                       // an attempt of a task, decided by the controller: no epoch
	aboutClaim                         // an attempt of a task, at the epoch of the claim that reports it
	aboutBuild                         // a build of the flow's integration branch, at a claim's epoch
	aboutClaimOrBuild                  // either of the two above (attempt_claimed)
	aboutRequest                       // an operator's request: the flow, or a task, or an attempt of it
	aboutLostClaim                     // a claim the controller found lapsed: aboutClaim's envelope, the controller's decision
	aboutLeadership                    // an election: the leadership token for a flow, its own leader epoch
)

// decision reports whether events of this kind are the controller's
// decisions, which carry the epoch of the leader that made them and are
// fenced by it; a worker's events carry a claim's epoch instead. An
// election is judged by its own rule (leaderElected).
func (a about) decision() bool {
	switch a {
	case aboutClaim, aboutBuild, aboutClaimOrBuild, aboutLeadership:
		return false
	}
	return true
}

// idRule is how an event id's key (after "TYPE:") is made from the
// envelope: every writer derives it, so that the same event written twice
// has the same id.
type idRule int

const (
	idFlow            idRule = iota // the flow's id
	idFlowN                         // the flow's id and a number: <flow>:<n>
	idFlowRound                     // the flow's id, or <flow>:r<round> after an operator retry
	idFlowAnd                       // <flow>:<what>, several of one type about a flow (a publish request's round, a feedback's key)
	idAttempt                       // the attempt's id
	idAttemptAnd                    // <attempt>:<what>, several of one type about an attempt (a cooldown's scope)
	idAttemptOrBudget               // the attempt's id; or <flow>/<task>:<budget|limited>:r<round>, a budget's or rate limits' end of a task
	idClaim                         // <attempt>:<epoch>, and :<extra> for several of one type in a claim
	idTaskRound                     // <flow>/<task>:<round>
	idRandom                        // anything: an operator's request is a distinct act each time
	idLeaderEpoch                   // the leader epoch the election opens
)

// checkEnvelope checks an event against itself, before the projection is
// looked at: it came on its own subject, its ids are well formed and
// agree with each other, and its envelope names what its type is about.
// h is the type's handler; ok is false for a type the fold does not know.
func checkEnvelope(subject string, ev *event.Event, h handler, ok bool) error {
	if !ok {
		return malformed("unknown event type %.64q", ev.Type)
	}
	if err := drovertype.ValidID(ev.Flow); err != nil {
		return malformed("flow: %v", err)
	}
	if want := event.Subject(ev.Flow, ev.Type); subject != want {
		return malformed("%s of flow %s came on subject %.200q, not %s", ev.Type, ev.Flow, subject, want)
	}
	if (h.about == aboutLeadership) != (ev.Flow == event.LeadershipFlow) {
		return malformed("%s of flow %s: only elections, and all of them, are of %s", ev.Type, ev.Flow, event.LeadershipFlow)
	}
	typ, key, err := drovertype.ParseEventID(ev.ID)
	if err != nil {
		return malformed("id: %v", err)
	}
	if typ != string(ev.Type) {
		return malformed("id %.80q is not the id of an event of type %s", ev.ID, ev.Type)
	}
	if err := checkAbout(ev, h.about); err != nil {
		return err
	}
	if !h.key.matches(ev, key) {
		return malformed("id %.80q is not the id its writer gives this %s event (from its %s)", ev.ID, ev.Type, h.key.about())
	}
	return nil
}

// checkAbout checks the envelope's task, attempt and epoch against what the
// type is about.
func checkAbout(ev *event.Event, a about) error {
	if ev.Task != "" {
		if err := drovertype.ValidID(ev.Task); err != nil {
			return malformed("task: %v", err)
		}
	}
	var build bool
	if ev.Attempt != "" {
		fl, task, _, err := drovertype.ParseAttemptID(ev.Attempt)
		switch {
		case err != nil:
			return malformed("attempt: %v", err)
		case fl != ev.Flow || task != ev.Task:
			return malformed("attempt %s is not of flow %s task %q", ev.Attempt, ev.Flow, ev.Task)
		}
		build = task == ""
	}
	claimed := a == aboutClaim || a == aboutBuild || a == aboutClaimOrBuild || a == aboutLostClaim
	switch {
	case claimed && ev.Epoch == 0:
		return malformed("%s without the epoch of the claim it comes from", ev.Type)
	case !claimed && ev.Epoch != 0:
		return malformed("%s with epoch %d: only a claim's events have one", ev.Type, ev.Epoch)
	case !a.decision() && a != aboutLeadership && ev.LeaderEpoch != 0:
		return malformed("%s with leader epoch %d: only the controller's decisions have one", ev.Type, ev.LeaderEpoch)
	case a == aboutLeadership && ev.LeaderEpoch == 0:
		return malformed("%s without the leader epoch it opens", ev.Type)
	}
	var needTask, needAttempt, noAttempt, needBuild bool
	switch a {
	case aboutFlow, aboutLeadership:
		if ev.Task != "" || ev.Attempt != "" {
			return malformed("%s names a task or an attempt; it is about a flow", ev.Type)
		}
	case aboutTask:
		needTask, noAttempt = true, true
	case aboutTaskMaybeAttempt:
		needTask = true
	case aboutAttempt, aboutClaim, aboutLostClaim:
		needTask, needAttempt = true, true
	case aboutBuild:
		needAttempt, needBuild = true, true
	case aboutClaimOrBuild:
		needAttempt = true
	case aboutRequest:
		// The flow; or a task; or an attempt, with its task.
	}
	switch {
	case needTask && ev.Task == "":
		return malformed("%s names no task", ev.Type)
	case needAttempt && ev.Attempt == "":
		return malformed("%s names no attempt", ev.Type)
	case noAttempt && ev.Attempt != "":
		return malformed("%s names an attempt; it is about a task", ev.Type)
	case needBuild && !build:
		return malformed("%s names attempt %s; it is about a build of the integration branch", ev.Type, ev.Attempt)
	case needTask && build:
		return malformed("%s names the integration build %s; it is about a task's attempt", ev.Type, ev.Attempt)
	}
	return nil
}

// matches reports whether key is the key the type's writer derives from ev.
func (k idRule) matches(ev *event.Event, key string) bool {
	switch k {
	case idFlow:
		return key == ev.Flow
	case idFlowN:
		n, ok := strings.CutPrefix(key, ev.Flow+":")
		return ok && isNumber(n)
	case idFlowRound:
		r, ok := strings.CutPrefix(key, ev.Flow+":r")
		return key == ev.Flow || ok && isNumber(r)
	case idFlowAnd:
		rest, ok := strings.CutPrefix(key, ev.Flow+":")
		return ok && rest != ""
	case idAttempt:
		return key == ev.Attempt
	case idAttemptAnd:
		rest, ok := strings.CutPrefix(key, ev.Attempt+":")
		return ok && rest != ""
	case idAttemptOrBudget:
		if ev.Attempt != "" && key == ev.Attempt {
			return true
		}
		_, ok := taskEnd(ev, key)
		return ok
	case idClaim:
		rest, ok := strings.CutPrefix(key, ev.Attempt+":"+strconv.FormatUint(ev.Epoch, 10))
		return ok && (rest == "" || len(rest) > 1 && rest[0] == ':')
	case idTaskRound:
		r, ok := strings.CutPrefix(key, ev.Flow+"/"+ev.Task+":")
		return ok && isNumber(r)
	case idLeaderEpoch:
		return key == strconv.FormatUint(ev.LeaderEpoch, 10)
	}
	return true
}

// taskEnd reads the key of a task_failed that ends a task rather than
// its attempt, <flow>/<task>:<why>:r<round>, and returns the class that
// id goes with: BUDGET_EXCEEDED (budget) or RATE_LIMITED (limited, the
// task waited out rate limits for its retry.rate_limit_wait).
func taskEnd(ev *event.Event, key string) (drovertype.ErrorClass, bool) {
	rest, ok := strings.CutPrefix(key, ev.Flow+"/"+ev.Task+":")
	if !ok {
		return "", false
	}
	why, r, ok := strings.Cut(rest, ":r")
	if !ok || !isNumber(r) {
		return "", false
	}
	switch why {
	case "budget":
		return drovertype.ClassBudgetExceeded, true
	case "limited":
		return drovertype.ClassRateLimited, true
	}
	return "", false
}

// about names what a key rule keys on, for a poison reason.
func (k idRule) about() string {
	switch k {
	case idFlow, idFlowN, idFlowRound, idFlowAnd:
		return "flow"
	case idAttempt, idAttemptAnd, idAttemptOrBudget:
		return "attempt"
	case idClaim:
		return "attempt and epoch"
	case idTaskRound:
		return "task"
	case idLeaderEpoch:
		return "leader epoch"
	}
	return "event"
}

// isNumber reports whether s is a number as Drover writes one: decimal
// digits, no sign, no leading zero.
func isNumber(s string) bool {
	if s == "" || len(s) > 19 || s != "0" && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// keyNumber returns the number at the end of an event id ("...:<n>"),
// for the keys idFlowN and idTaskRound check.
func keyNumber(id string) int {
	i := strings.LastIndexByte(id, ':')
	n, _ := strconv.Atoi(id[i+1:])
	return n
}
