package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newReport() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "report ATTEMPT|FLOW/TASK",
		Short: "Print an attempt's report, with the tails of its CLI's stdout and stderr",
		Long: `report prints what an attempt's worker reported: outcome, exit, changes, result commit,
error, usage, and the last lines of the CLI's stdout and stderr (masked). The target is an
attempt id (FLOW_TASK_N) or FLOW/TASK, which means the task's current (latest) attempt.

The report is read whole from its event on the EVENTS stream: status shows it without the
stdout tail, which the controller does not keep in its state. -o json prints
{"attempt", "event", "seq", "report"}. The tails are the agent's output: escaped on a
terminal (see logs), as they are to a pipe.`,
		Example: `  controller report hello-x1y2z3/greet
  controller report hello-x1y2z3_greet_2 -o json | jq -r .report.stdout_tail`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := attemptCommand(output, args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(cl *controller.Client) error {
				return printReport(cmd.Context(), cl, t, output, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printReport(ctx context.Context, cl *controller.Client, t controller.Target, output string, w io.Writer) error {
	a, err := pick(ctx, cl, t, false)
	if err != nil {
		return err
	}
	if a == nil {
		return notFound(fmt.Errorf("task %s/%s has no attempt yet", t.Flow, t.Task))
	}
	if a.ReportEventID == "" {
		return notFound(fmt.Errorf("attempt %s has not reported yet (state %s)", a.ID, a.State))
	}
	resp, err := cl.Report(ctx, a.ID)
	if err != nil {
		return err
	}
	if output == "json" {
		b, err := json.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	writeReport(w, resp)
	return nil
}

// writeReport prints a report as text: fields escaped, the output tails
// escaped on a terminal and as they are to a pipe.
func writeReport(w io.Writer, resp *controller.ReportResponse) {
	r := resp.Report
	l, body := termsafe.Line, bodyText(w)
	outcome := "failed"
	if r.Success {
		outcome = "succeeded"
	}
	fmt.Fprintf(w, "attempt %s %s: exit %d", l(resp.Attempt), outcome, r.ExitCode)
	if r.Signal != "" {
		fmt.Fprintf(w, " (%s)", l(r.Signal))
	}
	fmt.Fprintf(w, " after %.1fs\n", float64(r.DurationMS)/1000)
	if r.Error != nil {
		fmt.Fprintf(w, "error: %s: %s\n", l(string(r.Error.Class)), l(r.Error.Message))
	}
	if r.Commit != "" {
		fmt.Fprintf(w, "result: %s@%s\n", l(r.Branch), l(r.Commit))
	}
	if r.DiffSummary != "" {
		// The stat names the files the agent wrote: escaped everywhere.
		fmt.Fprintf(w, "changes: %s\n", termsafe.Text(strings.TrimSpace(r.DiffSummary)))
	}
	fmt.Fprintf(w, "usage: %s\n", l(usageText(r.Usage))) // the model's name is the CLI's
	if r.Turns > 0 {
		// A native runtime's: its turns, its tool calls, what it refused.
		fmt.Fprintf(w, "turns: %d, tool calls: %s\n", r.Turns, l(toolCallsText(r.ToolCalls)))
	}
	for _, refused := range r.Refusals {
		fmt.Fprintf(w, "refused: %s\n", l(refused))
	}
	if r.Sandbox != "" {
		fmt.Fprintf(w, "sandbox: %s\n", l(r.Sandbox))
	}
	// What was denied is quoted from the CLI's output.
	for _, d := range r.SandboxDenied {
		fmt.Fprintf(w, "denied by the sandbox: %s\n", l(d))
	}
	for _, s := range []struct{ name, tail string }{{"stdout", r.StdoutTail}, {"stderr", r.StderrTail}} {
		if s.tail == "" {
			continue
		}
		fmt.Fprintf(w, "--- %s (tail) ---\n%s", s.name, body(s.tail))
		if !strings.HasSuffix(s.tail, "\n") {
			fmt.Fprintln(w)
		}
	}
}

// usageText is the tokens and cost an attempt's CLI reported, "unknown"
// where it reported none: copilot states no tokens, so its 0 would lie.
func usageText(u *event.Usage) string {
	if !u.Known() {
		return "unknown (the CLI reported none)"
	}
	s := tokens(u.InputTokens) + " tokens in, " + tokens(u.OutputTokens) + " out"
	if u.CacheReadTokens != nil || u.CacheWriteTokens != nil {
		s += ", cache " + tokens(u.CacheReadTokens) + " read, " + tokens(u.CacheWriteTokens) + " written"
	}
	if u.CostUSD != nil {
		s += fmt.Sprintf(", $%.4f", *u.CostUSD)
	}
	if u.Model != "" {
		s += " (" + u.Model + ")"
	}
	return s
}

// tokens is a count the CLI reported, or "unknown".
func tokens(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return strconv.FormatInt(*n, 10)
}

// toolCallsText is a report's tool calls by name, in name order.
func toolCallsText(calls map[string]int) string {
	if len(calls) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, calls[name]))
	}
	return strings.Join(parts, ", ")
}
