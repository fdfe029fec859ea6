package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/policy"
	"github.com/drover-dev/drover/internal/readlimit"
	"github.com/drover-dev/drover/internal/termsafe"
)

// withClient connects to the controller's API for one command.
func withClient(cmd *cobra.Command, fn func(cl *controller.Client) error) error {
	nc, err := connect(cmd)
	if err != nil {
		return err
	}
	defer nc.Close()
	return fn(&controller.Client{NC: nc})
}

// newOperatorCmd builds cancel, retry, pause and resume: each records an
// operator request and prints what the controller made of it.
func newOperatorCmd(use, short, long, example string, call func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error)) *cobra.Command {
	var output, reason string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if _, err := controller.ParseTarget(args[0]); err != nil {
				return usageError(err)
			}
			return withClient(cmd, func(cl *controller.Client) error {
				resp, err := call(cmd.Context(), cl, args[0], reason)
				if err != nil {
					return err
				}
				if output == "json" {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(resp)
				}
				fmt.Fprintln(cmd.OutOrStdout(), termsafe.Text(resp.Message))
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the request")
	return cmd
}

func newCancel() *cobra.Command {
	return withCompletion(completeFlows|completeTasks|completeAttempts, newOperatorCmd("cancel FLOW|FLOW/TASK|ATTEMPT", "Cancel a flow, a task or an attempt",
		`cancel stops what is running and records it. The CLIs of the attempts concerned are stopped
on whichever worker holds them (SIGTERM to the process group, a grace period, then SIGKILL);
queued attempts never start. Cancelled tasks end in state cancelled and block their dependents;
a cancelled flow ends cancelled once its attempts have stopped. Cancelling an attempt cancels
its task.`,
		`  controller cancel hello-x1y2z3
  controller cancel hello-x1y2z3/greet --reason "wrong prompt"
  controller cancel hello-x1y2z3_greet_2`,
		func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error) {
			return cl.Cancel(ctx, target, reason)
		}))
}

func newRetry() *cobra.Command {
	return withCompletion(completeFlows|completeTasks, newOperatorCmd("retry FLOW|FLOW/TASK", "Start a new attempt of a failed, cancelled or blocked task",
		`retry reopens a failed or cancelled task with a fresh retry budget; the tasks it blocked
wait for it again, and a finished flow runs again (its integration branch is rebuilt as
drover/FLOW/integration-N). Retrying a blocked task retries the task that blocks it; retrying
a flow retries every failed or cancelled task of it. A task its budget (or its flow's) no
longer covers is refused until the budget is raised (controller budget).`,
		`  controller retry hello-x1y2z3/greet
  controller retry hello-x1y2z3          # every failed or cancelled task`,
		func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error) {
			return cl.Retry(ctx, target, reason)
		}))
}

func newBudget() *cobra.Command {
	var output, reason string
	var tokens int64
	var cost float64
	cmd := &cobra.Command{
		Use:   "budget FLOW|FLOW/TASK [--tokens N] [--cost-usd X]",
		Short: "Set the budget of a flow or a task",
		Long: `budget replaces the limits given of a flow's or a task's budget (0 removes one) and records
it. It starts nothing by itself: once the budget covers the spend again, controller retry
resumes the tasks it ended (BUDGET_EXCEEDED). Spend counts the input and output tokens the
CLIs reported, and their cost: a CLI's own figure, else an estimate from the pricing table.`,
		Example: `  controller budget hello-x1y2z3 --tokens 5000000
  controller budget hello-x1y2z3 --cost-usd 40 --reason "the migration is worth it"
  controller budget hello-x1y2z3/greet --tokens 0      # no limit of its own`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := controller.ParseTarget(args[0]); err != nil {
				return usageError(err)
			}
			req := controller.BudgetRequest{Target: args[0], Reason: reason}
			if cmd.Flags().Changed("tokens") {
				req.Tokens = &tokens
			}
			if cmd.Flags().Changed("cost-usd") {
				req.CostUSD = &cost
			}
			if req.Tokens == nil && req.CostUSD == nil {
				return usageError(fmt.Errorf("budget: give --tokens, --cost-usd or both"))
			}
			return withClient(cmd, func(cl *controller.Client) error {
				resp, err := cl.Budget(cmd.Context(), req)
				if err != nil {
					return err
				}
				if output == "json" {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(resp)
				}
				fmt.Fprintln(cmd.OutOrStdout(), resp.Message)
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "input and output tokens the flow or task may spend (0: no limit)")
	cmd.Flags().Float64Var(&cost, "cost-usd", 0, "US dollars the flow or task may spend (0: no limit)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the request")
	return withCompletion(completeFlows|completeTasks, cmd)
}

func newPause() *cobra.Command {
	return withCompletion(completeFlows, newOperatorCmd("pause FLOW", "Stop scheduling new attempts of a flow",
		`pause stops the controller from starting attempts of the flow, retries included; attempts
already queued or running go on. resume undoes it.`,
		`  controller pause hello-x1y2z3`,
		func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error) {
			return cl.Pause(ctx, target, reason)
		}))
}

func newResume() *cobra.Command {
	return withCompletion(completeFlows, newOperatorCmd("resume FLOW", "Restart scheduling of a paused flow", "", `  controller resume hello-x1y2z3`,
		func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error) {
			return cl.Resume(ctx, target, reason)
		}))
}

// newResolve is `controller runtime resolve`.
func newResolve() *cobra.Command {
	var flowArg, task, output, repo string
	cmd := &cobra.Command{
		Use:   "resolve --flow FLOW|FILE.yaml [--task TASK]",
		Short: "Show the runtimes and retry policy a task runs with, and the level each comes from",
		Long: `resolve shows, for each task (or one), the worker and validator runtimes with model and
arguments, the timeout, the retry policy and the scope, and the level each was taken from:
task > flow > project > global (the controller's defaults) > builtin. For a submitted flow it
shows what the flow was accepted with; for a flow file, what it would run with now.`,
		Example: `  controller runtime resolve --flow examples/checked.yaml --task greeting
  controller runtime resolve --flow hello-x1y2z3 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if flowArg == "" {
				return usageError(fmt.Errorf("--flow is required"))
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			req := controller.ResolveRequest{Task: task}
			data, err := readlimit.File(flowArg, flow.MaxFileSize)
			switch {
			case err == nil:
				spec, err := flow.Parse(flowArg, data, flow.Options{RepoOverride: repo, DefaultRuntime: cfg.Defaults.Runtime})
				if err != nil {
					return usageError(err)
				}
				req.Spec = spec
			case drovertype.ValidID(flowArg) == nil && (errors.Is(err, os.ErrNotExist) || isDir(flowArg)):
				req.Flow = flowArg
			case errors.Is(err, os.ErrNotExist):
				return usageError(fmt.Errorf("--flow %q is neither a file nor a flow id", flowArg))
			default:
				return usageError(err)
			}
			return withClient(cmd, func(cl *controller.Client) error {
				res, err := cl.Resolve(cmd.Context(), req)
				if err != nil {
					return located(flowArg, data, err)
				}
				if output == "json" {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(res)
				}
				printResolution(cmd.OutOrStdout(), res)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&flowArg, "flow", "", "a submitted flow's id, or a flow file")
	cmd.Flags().StringVar(&task, "task", "", "only this task")
	cmd.Flags().StringVar(&repo, "repo", "", "with a flow file: use this repo instead of the file's")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// isDir reports whether path is a directory: a flow id may name one by chance.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func printResolution(w io.Writer, res *controller.Resolution) {
	l := termsafe.Line
	ids := make([]string, 0, len(res.Tasks))
	for id := range res.Tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Fprintf(w, "repo %s, max_parallel %s\n", l(res.Repo), orNone(res.MaxParallel))
	for _, id := range ids {
		r := res.Tasks[id]
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\ntask %s\n", l(id))
		fmt.Fprintf(tw, "  worker\t%s\tfrom %s\n", l(choice(&r.Worker)), r.Worker.From)
		if r.Validator != nil {
			fmt.Fprintf(tw, "  validator\t%s\tfrom %s\n", l(choice(r.Validator)), r.Validator.From)
		}
		fmt.Fprintf(tw, "  review\t%t\t\n", r.Review)
		if r.Timeout > 0 {
			fmt.Fprintf(tw, "  timeout\t%s\tfrom %s\n", r.Timeout, r.TimeoutFrom)
		} else {
			fmt.Fprintf(tw, "  timeout\tthe runtime's\tfrom config\n")
		}
		placement, from := r.Placement(), r.PlacementTimeoutFrom
		if from == "" {
			from = policy.LevelBuiltin
		}
		fmt.Fprintf(tw, "  placement_timeout\t%s\tfrom %s\n", placement, from)
		rt := r.Retry
		for _, f := range []struct{ name, value string }{
			{"max_attempts", fmt.Sprint(rt.MaxAttempts)},
			{"initial_backoff", rt.InitialBackoff.String()},
			{"coefficient", fmt.Sprint(rt.Coefficient)},
			{"max_backoff", rt.MaxBackoff.String()},
			{"jitter", fmt.Sprint(rt.Jitter)},
			{"retry_on", strings.Trim(fmt.Sprint(rt.RetryOn), "[]")},
			{"fallback", strings.Join(rt.Fallback, " ")},
			{"rate_limit_wait", rt.LimitWait().String()},
		} {
			from := r.RetryFrom[f.name]
			if from == "" {
				from = policy.LevelBuiltin
			}
			fmt.Fprintf(tw, "  retry.%s\t%s\tfrom %s\n", f.name, l(f.value), from)
		}
		if r.Scope != nil {
			fmt.Fprintf(tw, "  scope\t%s\tfrom %s\n", l(fmt.Sprintf("allow %v deny %v", r.Scope.Allow, r.Scope.Deny)), r.ScopeFrom)
		}
		tw.Flush()
	}
}

func choice(c *policy.Choice) string {
	s := c.Name
	if c.Model != "" {
		s += " model=" + c.Model
	}
	if len(c.Args) > 0 {
		s += " args=" + strings.Join(c.Args, " ")
	}
	return s
}

func orNone(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// printTask is `controller status FLOW --task TASK`: the task, its plan and
// every attempt with the prompt it was given. Fields are escaped; the
// prompts are escaped on a terminal and written as they are to a pipe.
func printTask(w io.Writer, d *controller.FlowDetail, id string) error {
	var t *projection.Task
	for _, x := range d.Tasks {
		if x.ID == id {
			t = x
		}
	}
	if t == nil {
		return notFound(fmt.Errorf("flow %s has no task %s", d.Flow.ID, id))
	}
	l, body := termsafe.Line, bodyText(w)
	spec, _ := d.Flow.Spec.Task(id)
	fmt.Fprintf(w, "task %s of flow %s: %s, %d attempt(s)\n", l(t.ID), l(d.Flow.ID), l(string(t.State)), t.Attempts)
	if t.Error != nil {
		fmt.Fprintf(w, "error: %s: %s\n", l(string(t.Error.Class)), l(t.Error.Message))
	}
	if t.BlockedBy != "" {
		fmt.Fprintf(w, "blocked by: %s\n", l(t.BlockedBy))
	}
	if r := t.Retry; r != nil {
		fmt.Fprintf(w, "retry: attempt %d on %s (%s) at %s: %s\n", r.N, l(r.Runtime), l(string(r.Strategy)), r.DueAt.Local().Format("15:04:05.000"), l(r.Reason))
	}
	if wt := waitOf(d, t); wt != nil {
		fmt.Fprintf(w, "waits since %s: %s\n", wt.Since.Local().Format(time.DateTime), l(wt.Reason))
	}
	if t.ResultBranch != "" {
		fmt.Fprintf(w, "result: %s @ %s\n", l(t.ResultBranch), l(t.ResultCommit))
	}
	for _, a := range d.Attempts {
		if a.Task != id {
			continue
		}
		fmt.Fprintf(w, "\n── attempt %d (%s) on %s: %s", a.N, l(a.ID), l(a.Runtime), l(string(a.State)))
		if a.Worker != "" {
			fmt.Fprintf(w, ", worker %s", l(a.Worker))
		}
		fmt.Fprintln(w)
		if a.Error != nil {
			fmt.Fprintf(w, "error: %s: %s\n", l(string(a.Error.Class)), l(a.Error.Message))
		}
		if v := a.Verification; v != nil {
			for _, c := range v.Commands {
				fmt.Fprintf(w, "verify `%s`: exit %d\n", l(c.Command), c.ExitCode)
			}
			if v.Review != nil {
				fmt.Fprintf(w, "review by %s: passed=%t %s\n", l(v.Review.Runtime), v.Review.Passed, l(strings.Join(v.Review.Reasons, "; ")))
			}
			for _, s := range v.ScopeViolations {
				fmt.Fprintf(w, "scope violation: %s\n", l(s))
			}
		}
		prompt := a.Prompt
		if prompt == "" && spec != nil {
			prompt = spec.Prompt
		}
		fmt.Fprintf(w, "prompt:\n%s\n", body(indent(prompt)))
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// bodyText is how multi-line text from outside (a prompt, a patch, a
// report's output tail) is written to w: escaped (newlines and tabs kept)
// on a terminal, as it is to a pipe or a file, where the bytes may matter.
func bodyText(w io.Writer) func(string) string {
	if termsafe.IsTerminal(w) {
		return termsafe.Text
	}
	return func(s string) string { return s }
}
