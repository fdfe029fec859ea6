package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	seen := map[string]string{}
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := cl.Status(ctx, id)
		if err != nil {
			return err
		}
		d := st.Detail
		if d == nil {
			return fmt.Errorf("no detail for flow %s", id)
		}
		attempts := map[string]*projection.Attempt{}
		for _, a := range d.Attempts {
			attempts[a.ID] = a
		}
		if tty != nil {
			tty.draw(d, attempts)
		} else {
			for _, task := range d.Tasks {
				wait := waitOf(d, task)
				line := taskLine(task, attempts[task.Attempt], wait)
				if seen[task.ID] == line {
					continue
				}
				seen[task.ID] = line
				if output == "json" {
					c := watchChange{Time: time.Now().UTC(), Flow: id, Task: task.ID, State: string(task.State), Error: task.Error}
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
					fmt.Fprintf(w, "%s\n", b)
				} else {
					fmt.Fprintf(w, "%s  %-20s %s\n", time.Now().Format("15:04:05"), termsafe.Line(task.ID), line)
				}
			}
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
}

func (v *ttyView) draw(d *controller.FlowDetail, attempts map[string]*projection.Attempt) {
	width, height, err := term.GetSize(v.fd)
	if err != nil || width <= 0 {
		width, height = 80, 24
	}
	done := 0
	for _, t := range d.Tasks {
		if t.State.Terminal() {
			done++
		}
	}
	total := len(d.Tasks)
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
	frame = append(frame, head, progressBar(done, total, width))

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
	// Keep the frame inside the screen, or moving back up cannot reach its top.
	if maxRows := height - len(frame) - 2; maxRows > 1 && len(rows) > maxRows {
		more := len(rows) - maxRows + 1
		rows = append(rows[:maxRows-1], fmt.Sprintf("… and %d more tasks", more))
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
