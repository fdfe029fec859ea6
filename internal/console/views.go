package console

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// A table is rows of cells. The templates render them and the live
// updates send them as JSON, which the page's script turns into the same
// elements with textContent: one definition of each row for both.

// cell is one table cell (or one live field of a page).
type cell struct {
	Text  string   `json:"t,omitempty"`
	Href  string   `json:"h,omitempty"` // always a path under /ui/, built here
	Class string   `json:"c,omitempty"`
	Title string   `json:"ti,omitempty"`
	Bar   []barSeg `json:"b,omitempty"`
	Since int64    `json:"s,omitempty"` // unix ms: shown as an age, kept current by the page
	Until int64    `json:"u,omitempty"` // unix ms: shown as the time left, kept current by the page
}

// barSeg is one coloured part of a progress bar, in percent.
type barSeg struct {
	Class string  `json:"c"`
	X     float64 `json:"x"`
	W     float64 `json:"w"`
	Title string  `json:"t,omitempty"`
}

// row is one table row; Key identifies it for live updates.
type row struct {
	Key   string `json:"k"`
	Class string `json:"c,omitempty"`
	Index int    `json:"i,omitempty"` // a task's index in its flow's order, for the graph
	Cells []cell `json:"cells"`
}

func flowHref(id string) string { return "/ui/flows/" + url.PathEscape(id) }
func taskHref(flowID, task string) string {
	return flowHref(flowID) + "/tasks/" + url.PathEscape(task)
}
func attemptHref(id string) string { return "/ui/attempts/" + url.PathEscape(id) }

func ageCell(t time.Time, now time.Time) cell {
	if t.IsZero() {
		return cell{Text: "—"}
	}
	return cell{Text: age(now.Sub(t)), Since: t.UnixMilli(), Title: t.UTC().Format(time.RFC3339)}
}

// age words a duration the way the page's script does (console.js).
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(0, int(d.Seconds()))) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Second:
		return strconv.Itoa(int(d.Milliseconds())) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

func tokens(n int64) string {
	switch {
	case n >= 10_000_000:
		return strconv.FormatInt(n/1_000_000, 10) + "M"
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 10_000:
		return strconv.FormatInt(n/1000, 10) + "k"
	case n >= 1000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// taskStates are the task states in the order bars and counts show them.
var taskStates = []drovertype.TaskState{
	drovertype.TaskSucceeded, drovertype.TaskFailed, drovertype.TaskCancelled, drovertype.TaskBlocked,
	drovertype.TaskRunning, drovertype.TaskRetrying, drovertype.TaskScheduled, drovertype.TaskPending,
}

// stateIndex numbers the task states for the graph's compact updates.
func stateIndex(s drovertype.TaskState) int {
	if i := slices.Index(taskStates, s); i >= 0 {
		return i
	}
	return len(taskStates) - 1
}

// counts are a flow's tasks by state.
type counts map[drovertype.TaskState]int

func (c counts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c counts) ended() int {
	n := 0
	for s, v := range c {
		if s.Terminal() {
			n += v
		}
	}
	return n
}

func (c counts) bar() cell {
	total := c.total()
	out := cell{Text: fmt.Sprintf("%d/%d", c.ended(), total), Class: "progress"}
	if total == 0 {
		return out
	}
	x := 0.0
	for _, s := range taskStates {
		if n := c[s]; n > 0 {
			w := 100 * float64(n) / float64(total)
			out.Bar = append(out.Bar, barSeg{Class: "st-" + string(s), X: x, W: w, Title: fmt.Sprintf("%d %s", n, s)})
			x += w
		}
	}
	return out
}

func (c counts) text() string {
	var parts []string
	for _, s := range taskStates {
		if n := c[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, " · ")
}

// flowState is what a flow's state cell says: its state, and whether it
// is paused or being cancelled.
func flowState(f *projection.Flow) cell {
	s := string(f.State)
	c := cell{Text: s, Class: "state st-" + s}
	switch {
	case f.State.Terminal():
	case f.Cancel != nil:
		c.Text, c.Title = s+" (cancelling)", f.Cancel.Reason
	case f.Paused:
		c.Text, c.Class = s+" (paused)", "state st-paused"
	}
	return c
}

// flowSummary is a flow as the flows list and the flow page's header show it.
type flowSummary struct {
	ID, Name, Repo, Base string
	State                cell
	Terminal             bool
	Paused, Cancelling   bool
	Counts               counts
	Submitted, Ended     time.Time
	Spend, Budget        cell
	Integration          cell
	PullRequest          cell
}

func summarize(st *projection.State, f *projection.Flow) flowSummary {
	s := flowSummary{ID: f.ID, Name: f.Spec.Name, Repo: f.Spec.Repo, Base: f.Spec.Base, State: flowState(f),
		Terminal: f.State.Terminal(), Paused: f.Paused, Cancelling: f.Cancel != nil,
		Counts: counts{}, Submitted: f.SubmittedAt, Ended: f.CompletedAt, Spend: spendCell(f.Spend), Integration: integrationCell(f),
		PullRequest: prCell(f)}
	var ends budgetEnds
	for _, id := range f.Order {
		if t := st.Task(f.ID, id); t != nil {
			s.Counts[t.State]++
			ends.add(f, t)
		}
	}
	s.Budget = flowBudgetCell(f, ends)
	return s
}

func integrationCell(f *projection.Flow) cell {
	in := f.Integration
	if in == nil {
		if f.State.Terminal() {
			return cell{Text: "none"}
		}
		return cell{Text: "when every task has ended"}
	}
	c := cell{Text: fmt.Sprintf("%s %s", in.Branch, in.State), Class: "st-" + string(in.State)}
	if in.Commit != "" {
		c.Text += " at " + short(in.Commit)
	}
	if in.Error != nil {
		c.Text += ": " + string(in.Error.Class)
		c.Title = in.Error.Message
	}
	return c
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (s flowSummary) row(now time.Time) row {
	repo := s.Repo
	if s.Base != "" && s.Base != "HEAD" {
		repo += " @ " + s.Base
	}
	return row{Key: s.ID, Cells: []cell{
		{Text: s.ID, Href: flowHref(s.ID), Title: s.Name},
		s.State,
		s.Counts.bar(),
		ageCell(s.Submitted, now),
		{Text: repo, Class: "repo"},
		s.Spend,
		s.Budget,
	}}
}

// flowList is the flows page: every flow, newest first.
func flowList(st *projection.State) []flowSummary {
	out := make([]flowSummary, 0, len(st.Flows))
	for _, f := range st.Flows {
		out = append(out, summarize(st, f))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Submitted.After(b.Submitted) || a.Submitted.Equal(b.Submitted) && a.ID > b.ID
	})
	return out
}

// taskRow is a task in the flow page's table.
func taskRow(st *projection.State, t *projection.Task, index int, now time.Time) row {
	errCell := cell{Text: "—"}
	if e := taskError(st, t); e != nil {
		errCell = cell{Text: string(e.Class), Title: e.Message, Class: "err"}
	}
	cur := cell{Text: "—"}
	if t.Attempt != "" {
		cur = cell{Text: "#" + strconv.Itoa(t.Attempts), Href: attemptHref(t.Attempt)}
	}
	stateText := string(t.State)
	if t.State == drovertype.TaskRetrying && t.Retry != nil {
		stateText += " (" + string(t.Retry.Strategy) + " on " + t.Retry.Runtime + ")"
	}
	if t.State == drovertype.TaskBlocked && t.BlockedBy != "" {
		stateText += " by " + t.BlockedBy
	}
	state := cell{Text: stateText, Class: "state st-" + string(t.State)}
	if wait, why, _ := waitText(st, t); wait != "" {
		state.Text, state.Title = string(t.State)+", "+wait, why
	}
	return row{Key: t.ID, Index: index, Cells: []cell{
		{Text: t.ID, Href: taskHref(t.Flow, t.ID)},
		state,
		cur,
		{Text: t.Runtime},
		errCell,
		ageCell(t.UpdatedAt, now),
	}}
}

// taskError is why a task failed, or why its current attempt did.
func taskError(st *projection.State, t *projection.Task) *event.ErrorInfo {
	if t.Error != nil {
		return t.Error
	}
	if a := st.Attempts[t.Attempt]; a != nil && a.Error != nil {
		return a.Error
	}
	return nil
}

// taskAttempts lists a task's attempts, first first.
func taskAttempts(st *projection.State, t *projection.Task) []*projection.Attempt {
	var out []*projection.Attempt
	for n := 1; n <= t.Attempts; n++ {
		if a := st.Attempts[drovertype.AttemptID(t.Flow, t.ID, n)]; a != nil {
			cp := *a
			out = append(out, &cp)
		}
	}
	return out
}

// attemptRow is an attempt in a task's history.
func attemptRow(a *projection.Attempt, prev *projection.Attempt, now time.Time) row {
	how := "first"
	if prev != nil {
		how = "retry"
		if prev.Runtime != a.Runtime {
			how = "fallback from " + prev.Runtime
		}
	}
	errCell := cell{Text: "—"}
	if a.Error != nil {
		errCell = cell{Text: string(a.Error.Class) + ": " + oneLine(a.Error.Message, 200), Title: a.Error.Message, Class: "err"}
	} else if a.Report != nil && a.Report.Error != nil {
		errCell = cell{Text: string(a.Report.Error.Class) + ": " + oneLine(a.Report.Error.Message, 200), Class: "err"}
	}
	dur := cell{Text: "—"}
	if !a.EndedAt.IsZero() && !a.ClaimedAt.IsZero() {
		dur.Text = durationText(a.EndedAt.Sub(a.ClaimedAt))
	}
	return row{Key: a.ID, Cells: []cell{
		{Text: "#" + strconv.Itoa(a.N), Href: attemptHref(a.ID)},
		{Text: string(a.State), Class: "state st-" + string(a.State)},
		{Text: how},
		{Text: a.Runtime + modelSuffix(a.Model)},
		{Text: a.Worker},
		ageCell(a.ScheduledAt, now),
		dur,
		errCell,
	}}
}

func modelSuffix(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}

// oneLine is s on one line, at most n bytes (cut between characters).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(cleanTerminal(s)), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utfStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utfStart(b byte) bool { return b&0xc0 != 0x80 }

// attemptEventSeqs finds the sequences of the events about an attempt:
// their ids are "<type>:<attempt>" or "<type>:<attempt>:<epoch>[:key]"
// (drovertype.EventID, ClaimEventID), and the projection keeps every id it
// folded with its sequence.
func attemptEventSeqs(st *projection.State, attempt string, limit int) []uint64 {
	var out []uint64
	for id, seq := range st.Seen {
		_, key, ok := strings.Cut(id, ":")
		if !ok || !strings.HasPrefix(key, attempt) {
			continue
		}
		if rest := key[len(attempt):]; rest == "" || rest[0] == ':' {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// taskEventSeqs finds the sequences of the controller's decisions about a
// task's attempts that the projection does not keep: the retries it
// scheduled (runtime_recovery_scheduled, keyed by the failed attempt).
func recoverySeqs(st *projection.State, attempts []*projection.Attempt) []uint64 {
	var out []uint64
	for _, a := range attempts {
		if seq, ok := st.Seen[drovertype.EventID(event.RuntimeRecoveryScheduled, a.ID)]; ok {
			out = append(out, seq)
		}
	}
	return out
}

// timelineEntry is one event of an attempt's life.
type timelineEntry struct {
	Seq     uint64
	Time    time.Time
	Type    string
	Summary string
}

func (e timelineEntry) row(start time.Time) row {
	off := ""
	if !start.IsZero() {
		off = "+" + durationText(e.Time.Sub(start))
		if e.Time.Equal(start) {
			off = "0"
		}
	}
	return row{Key: strconv.FormatUint(e.Seq, 10), Cells: []cell{
		{Text: e.Time.UTC().Format("15:04:05.000"), Title: e.Time.UTC().Format(time.RFC3339Nano)},
		{Text: off},
		{Text: e.Type, Class: "ev"},
		{Text: e.Summary},
	}}
}

// summaries say in a line what each kind of event says, for the timeline;
// a type not listed has no summary.
var summaries = map[event.Type]func(*event.Event) string{
	event.AttemptScheduled: summary(func(ev *event.Event, d *event.AttemptScheduledData) string {
		return fmt.Sprintf("attempt %d on %s%s, pool %s", d.N, d.Runtime, modelSuffix(d.Model), d.Pool)
	}),
	event.AttemptClaimed: summary(func(ev *event.Event, d *event.AttemptClaimedData) string {
		return fmt.Sprintf("by %s (epoch %d)", d.Worker, ev.Epoch)
	}),
	event.AdapterInitialized: summary(func(ev *event.Event, d *event.AdapterInitializedData) string {
		return strings.TrimSpace(d.Binary + " " + d.Version)
	}),
	event.PrepareCompleted: summary(func(ev *event.Event, d *event.PrepareCompletedData) string {
		return "branch " + d.Branch + " from " + short(d.BaseCommit)
	}),
	event.RuntimeStarted: summary(func(ev *event.Event, d *event.RuntimeStartedData) string {
		return fmt.Sprintf("pid %d: %s", d.Pid, strings.Join(d.Argv, " "))
	}),
	event.RuntimeExited: summary(func(ev *event.Event, d *event.RuntimeExitedData) string {
		return fmt.Sprintf("%s, exit %d %s after %s", d.Outcome, d.ExitCode, d.Signal, durationText(time.Duration(d.DurationMS)*time.Millisecond))
	}),
	event.FileModified: summary(func(ev *event.Event, d *event.FileModifiedData) string {
		return d.Change + " " + d.Path
	}),
	event.DiffComputed: summary(func(ev *event.Event, d *event.DiffComputedData) string {
		return fmt.Sprintf("%d created, %d modified, %d deleted, %d bytes", len(d.Created), len(d.Modified), len(d.Deleted), d.DiffBytes)
	}),
	event.CheckpointCommitCreated: summary(func(ev *event.Event, d *event.CheckpointCommitCreatedData) string {
		return "commit " + short(d.Commit)
	}),
	event.VerificationCompleted: summary(func(ev *event.Event, d *event.Verification) string {
		var s string
		s = "passed"
		if !d.Passed {
			s = "failed"
		}
		return s
	}),
	event.AttemptReported: summary(func(ev *event.Event, d *event.Report) string {
		var s string
		s = "success"
		if !d.Success {
			s = "failure"
			if d.Error != nil {
				s += ": " + string(d.Error.Class)
			}
		}
		return s
	}),
	event.RuntimeErrorClassified: summary(func(ev *event.Event, d *event.RuntimeErrorClassifiedData) string {
		return string(d.Class) + ": " + d.Message
	}),
	event.RuntimeRecoveryScheduled: summary(func(ev *event.Event, d *event.RuntimeRecoveryScheduledData) string {
		return fmt.Sprintf("%s: attempt %d on %s after %s (%s)", d.Strategy, d.N, d.Runtime, durationText(time.Duration(d.DelayMS)*time.Millisecond), d.Reason)
	}),
	event.TaskFailed: summary(func(ev *event.Event, d *event.TaskFailedData) string {
		return strings.TrimSpace(string(d.Class) + " " + d.Reason)
	}),
	event.AttemptLost: summary(func(ev *event.Event, d *event.AttemptLostData) string {
		return d.Worker + ": " + d.Reason
	}),
	event.AttemptAbandoned: summary(func(ev *event.Event, d *event.AttemptAbandonedData) string {
		return d.Reason
	}),
	event.CancelRequested: summary(func(ev *event.Event, d *event.CancelRequestedData) string {
		return d.Scope + " " + d.Reason
	}),
	event.TaskCancelled: summary(func(ev *event.Event, d *event.TaskCancelledData) string {
		return d.Reason
	}),
	event.RuntimeCapabilitiesEvaluated: summary(func(_ *event.Event, d *event.RuntimeCapabilitiesEvaluatedData) string {
		s := d.Adapter + ", scope " + d.ScopeEnforcement
		if d.Model != "" {
			s += ", " + strings.TrimSpace(d.Provider+" "+d.Model)
		}
		return s
	}),
}

// summary makes a summary function of one that reads the payload as a T;
// an event whose payload does not decode has none.
func summary[T any](fn func(*event.Event, *T) string) func(*event.Event) string {
	return func(ev *event.Event) string {
		var d T
		if ev.Payload(&d) != nil {
			return ""
		}
		return fn(ev, &d)
	}
}

// summarizeEvent says in a line what an event of an attempt's life holds.
func summarizeEvent(ev *event.Event) string {
	f, ok := summaries[ev.Type]
	if !ok {
		return ""
	}
	return oneLine(f(ev), 300)
}

// phaseBar draws an attempt's timeline as a bar: each event's phase
// lasts until the next event.
func phaseBar(entries []timelineEntry, end time.Time) []barSeg {
	if len(entries) == 0 {
		return nil
	}
	start := entries[0].Time
	if end.Before(entries[len(entries)-1].Time) {
		end = entries[len(entries)-1].Time
	}
	total := end.Sub(start)
	if total <= 0 {
		return nil
	}
	var out []barSeg
	for i, e := range entries {
		next := end
		if i+1 < len(entries) {
			next = entries[i+1].Time
		}
		x := 100 * float64(e.Time.Sub(start)) / float64(total)
		w := 100 * float64(next.Sub(e.Time)) / float64(total)
		if w > 0 {
			out = append(out, barSeg{Class: "ph-" + e.Type, X: x, W: w, Title: e.Type + " " + durationText(next.Sub(e.Time))})
		}
	}
	return out
}
