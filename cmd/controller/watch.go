package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newWatch() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "watch FLOW",
		Short: "Follow a flow live until it ends",
		Long: `watch follows a flow until it ends and exits 0 if it succeeded, 1 if it failed or was
cancelled. On a terminal it redraws a progress bar (tasks done out of all) and a table of
the tasks with their state, attempt, worker and phase. When stdout is not a terminal it
prints a timestamped line each time a task's state changes (what submit --watch prints);
with -o json, one JSON object per change.`,
		Example: `  controller watch hello-x1y2z3
  controller watch hello-x1y2z3 | tee watch.log      # plain lines
  controller watch hello-x1y2z3 -o json | jq -c .`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if t, err := controller.ParseTarget(args[0]); err != nil || t.Task != "" {
				return usageError(fmt.Errorf("%q is not a flow id", args[0]))
			}
			return withClient(cmd, func(cl *controller.Client) error {
				return watchFlowAs(cmd.Context(), cl, args[0], cmd.OutOrStdout(), output)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (one object per task change)")
	return cmd
}

// watchFlow follows a flow to its end: redrawn on a terminal, plain lines
// otherwise. It returns an error with exit code 1 when the flow did not succeed.
func watchFlow(ctx context.Context, cl *controller.Client, id string, w io.Writer) error {
	return watchFlowAs(ctx, cl, id, w, "text")
}

// watchChange is one task change, as watch -o json prints it.
type watchChange struct {
	Time    time.Time        `json:"time"`
	Flow    string           `json:"flow"`
	Task    string           `json:"task,omitempty"`
	State   string           `json:"state"`
	Attempt string           `json:"attempt,omitempty"`
	Worker  string           `json:"worker,omitempty"`
	Phase   string           `json:"phase,omitempty"`
	Detail  string           `json:"detail,omitempty"`
	Error   *event.ErrorInfo `json:"error,omitempty"`
}

func watchFlowAs(ctx context.Context, cl *controller.Client, id string, w io.Writer, output string) error {
	var tty *ttyView
	if f, ok := w.(*os.File); ok && output == "text" && term.IsTerminal(int(f.Fd())) {
		tty = &ttyView{w: f, fd: int(f.Fd())}
	}
	wt := &watcher{cl: cl, id: id, w: w, output: output}
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		var d *controller.FlowDetail
		var err error
		if tty != nil {
			d, err = tty.poll(ctx, cl, id)
		} else {
			d, err = wt.poll(ctx)
		}
		if err != nil {
			return err
		}
		if d.Flow.State.Terminal() {
			took := d.Flow.CompletedAt.Sub(d.Flow.SubmittedAt).Round(time.Millisecond)
			if output == "json" {
				b, _ := json.Marshal(watchChange{Time: time.Now().UTC(), Flow: id, State: string(d.Flow.State), Detail: "flow ended in " + took.String()})
				fmt.Fprintf(w, "%s\n", b)
			} else {
				fmt.Fprintf(w, "flow %s %s in %s\n", termsafe.Line(id), termsafe.Line(string(d.Flow.State)), took)
			}
			if d.Flow.State != drovertype.FlowSucceeded {
				return failed(fmt.Errorf("flow %s %s", id, d.Flow.State))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watchActive are the tasks whose lines change most (their attempts'
// phases), which watch asks for every time.
var watchActive = []string{string(drovertype.TaskScheduled), string(drovertype.TaskRunning), string(drovertype.TaskRetrying),
	controller.FilterWaiting}

// watcher prints a line each time a task's line changes, without reading
// the whole flow each time: its first look walks every task, page by
// page; after that it asks for the active tasks, for those that were
// active and are no longer, and for the tasks of any state whose count is
// not what the lines printed add up to (a task blocked, or reopened,
// without being active when looked at).
type watcher struct {
	cl     *controller.Client
	id     string
	w      io.Writer
	output string
	lines  map[string]string               // task -> its last line printed
	states map[string]drovertype.TaskState // task -> its state then
	active map[string]bool                 // the active tasks at the last look
	last   *controller.FlowDetail          // the latest page
}

func (v *watcher) poll(ctx context.Context) (*controller.FlowDetail, error) {
	if v.lines == nil {
		v.lines, v.states, v.active = map[string]string{}, map[string]drovertype.TaskState{}, map[string]bool{}
		err := v.walk(ctx, nil, v.active)
		return v.last, err
	}
	now := map[string]bool{}
	if err := v.walk(ctx, watchActive, now); err != nil {
		return nil, err
	}
	var gone []string
	for id := range v.active {
		if !now[id] {
			gone = append(gone, id)
		}
	}
	v.active = now
	sort.Strings(gone)
	for len(gone) > 0 {
		n := min(len(gone), controller.MaxPageLimit)
		resp, err := v.cl.StatusPage(ctx, controller.StatusRequest{Flow: v.id, Limit: n, Tasks: gone[:n]})
		if err != nil {
			return nil, err
		}
		v.show(resp.Detail, nil)
		gone = gone[n:]
	}
	if off := v.unaccounted(); len(off) > 0 {
		if err := v.walk(ctx, off, nil); err != nil {
			return nil, err
		}
	}
	return v.last, nil
}

// walk prints the changed lines of the tasks in states (every task when
// nil), page by page, and notes them in active when it is not nil.
func (v *watcher) walk(ctx context.Context, states []string, active map[string]bool) error {
	req := controller.StatusRequest{Flow: v.id, Limit: controller.MaxPageLimit, States: states}
	return v.cl.WalkTasks(ctx, req, func(resp *controller.StatusResponse) error {
		v.show(resp.Detail, active)
		return nil
	})
}

// unaccounted are the states whose count in the latest summary differs
// from the lines printed.
func (v *watcher) unaccounted() []string {
	tally := map[drovertype.TaskState]int{}
	for _, s := range v.states {
		tally[s]++
	}
	var off []string
	for _, s := range controller.TaskStates() {
		if tally[s] != v.last.Page.Counts[s] {
			off = append(off, string(s))
		}
	}
	return off
}

// show prints the lines of a page's tasks that changed.
func (v *watcher) show(d *controller.FlowDetail, active map[string]bool) {
	v.last = d
	attempts := map[string]*projection.Attempt{}
	for _, a := range d.Attempts {
		attempts[a.ID] = a
	}
	for _, task := range d.Tasks {
		wait := waitOf(d, task)
		if active != nil && (wait != nil || slices.Contains(watchActive, string(task.State))) {
			active[task.ID] = true
		}
		v.states[task.ID] = task.State
		line := taskLine(task, attempts[task.Attempt], wait)
		if v.lines[task.ID] == line {
			continue
		}
		v.lines[task.ID] = line
		if v.output != "json" {
			fmt.Fprintf(v.w, "%s  %-20s %s\n", time.Now().Format("15:04:05"), termsafe.Line(task.ID), line)
			continue
		}
		c := watchChange{Time: time.Now().UTC(), Flow: v.id, Task: task.ID, State: string(task.State), Error: task.Error}
		if a := attempts[task.Attempt]; a != nil {
			c.Attempt, c.Worker, c.Phase = a.ID, a.Worker, string(a.Phase)
		}
		if task.State == drovertype.TaskBlocked {
			c.Detail = "blocked by " + task.BlockedBy
		}
		if wait != nil {
			c.Detail = "waits: " + wait.Reason
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(v.w, "%s\n", b)
	}
}

// taskLine is a task's state in one line, for the plain output, escaped:
// worker names, error messages and why it waits come from outside.
func taskLine(task *projection.Task, a *projection.Attempt, wait *controller.WaitStatus) string {
	return termsafe.Line(rawTaskLine(task, a, wait))
}

func rawTaskLine(task *projection.Task, a *projection.Attempt, wait *controller.WaitStatus) string {
	line := string(task.State)
	if a != nil && !task.State.Terminal() {
		line += fmt.Sprintf(" (attempt %d", a.N)
		if a.Worker != "" {
			line += " on " + a.Worker
		}
		if a.Phase != "" {
			line += ", " + string(a.Phase)
		}
		line += ")"
	}
	if task.State == drovertype.TaskFailed && task.Error != nil {
		line += ": " + task.Error.Message
	}
	if task.State == drovertype.TaskBlocked {
		line += " by " + task.BlockedBy
	}
	if wait != nil && !task.State.Terminal() {
		line += ": waits: " + wait.Reason
	}
	return line
}

// ttyView redraws the flow's progress in place on a terminal.
type ttyView struct {
	w     io.Writer
	fd    int
	lines int    // lines drawn last time, to move back over
	last  string // the frame drawn last time
	tasks int    // the flow's tasks, at the last look
}

// poll asks for what fits on the screen: every task of a flow that fits,
// else the active ones (the counts say the rest), and draws it.
func (v *ttyView) poll(ctx context.Context, cl *controller.Client, id string) (*controller.FlowDetail, error) {
	width, height, err := term.GetSize(v.fd)
	if err != nil || width <= 0 {
		width, height = 80, 24
	}
	rows := min(max(height-5, 1), controller.MaxPageLimit)
	req := controller.StatusRequest{Flow: id, Limit: rows}
	if v.tasks == 0 || v.tasks > rows {
		req.States = watchActive
	}
	resp, err := cl.StatusPage(ctx, req)
	if err != nil {
		return nil, err
	}
	d := resp.Detail
	v.tasks = d.Page.Tasks
	v.draw(d, width, height)
	return d, nil
}

func (v *ttyView) draw(d *controller.FlowDetail, width, height int) {
	attempts := map[string]*projection.Attempt{}
	for _, a := range d.Attempts {
		attempts[a.ID] = a
	}
	done := 0
	for s, n := range d.Page.Counts {
		if s.Terminal() {
			done += n
		}
	}
	total := d.Page.Tasks
	var frame []string
	elapsed := time.Since(d.Flow.SubmittedAt)
	if d.Flow.State.Terminal() {
		elapsed = d.Flow.CompletedAt.Sub(d.Flow.SubmittedAt)
	}
	l := termsafe.Line
	head := fmt.Sprintf("flow %s: %s, %s", l(d.Flow.ID), l(string(d.Flow.State)), elapsed.Round(time.Second))
	if d.Flow.Paused {
		head += " (paused)"
	}
	frame = append(frame, head, progressBar(done, total, width), countsLine(d.Page))

	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tATTEMPT\tWORKER\tPHASE\tDETAIL")
	for _, t := range d.Tasks {
		att, worker, phase, detail := "", "", "", ""
		if a := attempts[t.Attempt]; a != nil {
			att, worker, phase = fmt.Sprint(a.N), a.Worker, string(a.Phase)
		}
		switch {
		case t.Error != nil && t.State.Terminal():
			detail = t.Error.Message
		case t.BlockedBy != "":
			detail = "blocked by " + t.BlockedBy
		case waitOf(d, t) != nil:
			detail = "waits: " + waitOf(d, t).Reason
		case t.Retry != nil:
			detail = fmt.Sprintf("retry %d at %s", t.Retry.N, t.Retry.DueAt.Local().Format("15:04:05"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l(t.ID), l(string(t.State)), att, l(worker), l(phase), l(detail))
	}
	tw.Flush()
	rows := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	more := d.Page.After(len(d.Tasks))
	// Keep the frame inside the screen, or moving back up cannot reach its top.
	if maxRows := height - len(frame) - 2; maxRows > 1 && len(rows) > maxRows {
		more += len(rows) - maxRows + 1
		rows = rows[:maxRows-1]
	}
	if more > 0 {
		rows = append(rows, fmt.Sprintf("… and %d more tasks", more))
	}
	frame = append(frame, rows...)

	joined := strings.Join(frame, "\n")
	if joined == v.last {
		return
	}
	v.last = joined
	var out strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&out, "\r\x1b[%dA", v.lines)
	}
	out.WriteString("\x1b[J")
	for _, l := range frame {
		out.WriteString(truncate(l, width-1))
		out.WriteString("\n")
	}
	v.lines = len(frame)
	_, _ = io.WriteString(v.w, out.String())
}

// countsLine is a page's counts of the flow's tasks by state, and how
// many wait.
func countsLine(p *controller.TaskPage) string {
	var parts []string
	for _, s := range controller.TaskStates() {
		if n := p.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	if p.Waiting > 0 {
		parts = append(parts, fmt.Sprintf("waiting=%d", p.Waiting))
	}
	return strings.Join(parts, " ")
}

// progressBar draws "[=====     ] 3/5 tasks done" within width columns.
func progressBar(done, total, width int) string {
	label := fmt.Sprintf(" %d/%d tasks done", done, total)
	n := min(width-len(label)-3, 50)
	if n < 5 {
		return strings.TrimSpace(label)
	}
	filled := 0
	if total > 0 {
		filled = done * n / total
	}
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", n-filled) + "]" + label
}

// truncate cuts s to at most n runes.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}
