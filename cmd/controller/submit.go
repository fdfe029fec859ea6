package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/readlimit"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newSubmit() *cobra.Command {
	var repo string
	var watch, strict bool
	cmd := &cobra.Command{
		Use:   "submit FLOW.yaml|-",
		Short: "Validate a flow file and submit it",
		Long: `submit validates the flow file (schema, ids, dependencies, runtimes) and sends it to the
controller; "-" reads the flow from standard input. A malformed flow is rejected with the
file, line and field, exit code 2, and nothing is recorded; so is a file larger than 8 MiB
or one that is not a regular file (a directory, a FIFO, a device). With --watch it follows
the flow to its end and exits 0 if it succeeded, 1 if not.

When no live worker serves a runtime the flow needs (a task's runtime, a fallback, a
validator) submit warns on stderr, naming the tasks that need it and why the workers that
list it do not serve it; with --strict it refuses the flow instead (exit 6) and records
nothing.`,
		Example: `  controller submit examples/hello.yaml --watch
  controller submit flow.yaml --repo /srv/git/project.git
  controller submit flow.yaml --strict               # refuse what no live worker can run now
  generate-flow | controller submit -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			name, data, err := readFlow(cmd, args[0])
			if err != nil {
				return err
			}
			// Runtimes are checked by the controller, whose configuration is
			// the one that counts; everything else is checked here, with lines.
			spec, err := flow.Parse(name, data, flow.Options{
				RepoOverride:   repo,
				DefaultRuntime: cfg.Defaults.Runtime,
			})
			if err != nil {
				return usageError(err)
			}
			nc, err := controller.Connect(cfg)
			if err != nil {
				return err
			}
			defer nc.Close()
			cl := &controller.Client{NC: nc}
			resp, err := cl.SubmitFlow(cmd.Context(), controller.SubmitRequest{Spec: *spec, Strict: strict})
			if err != nil {
				var apiErr *controller.APIError
				if errors.As(err, &apiErr) && (apiErr.Code == controller.CodeBadRequest && len(apiErr.Problems) == 0 || apiErr.Code == controller.CodeNoWorker) {
					return fmt.Errorf("%s: %w", name, err)
				}
				return located(name, data, err)
			}
			id := resp.Flow
			for _, w := range resp.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", termsafe.Line(w))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "submitted flow %s (%d tasks)\n", termsafe.Line(id), len(spec.Tasks))
			if !watch {
				return nil
			}
			return watchFlow(cmd.Context(), cl, id, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "use this repo URL or path instead of the flow file's")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the flow until it ends")
	cmd.Flags().BoolVar(&strict, "strict", false, "refuse the flow when no live worker serves a runtime it needs (exit 6)")
	return cmd
}

// located places the problems the controller found in a flow file (its
// runtimes and project, which only it knows) in the file, as the file's
// other problems are placed; any other error is returned as it is.
func located(name string, data []byte, err error) error {
	var apiErr *controller.APIError
	if errors.As(err, &apiErr) && apiErr.Code == controller.CodeBadRequest && len(apiErr.Problems) > 0 {
		return flow.Locate(name, data, apiErr.Problems)
	}
	return err
}

// stdinName names standard input in a flow's error messages; a relative
// repo path in it is relative to the working directory.
const stdinName = "<stdin>"

// readFlow reads a flow file, or standard input for "-", with the flow
// size limit: a larger file is refused by its size before it is read, and a
// FIFO or device is refused before it is opened.
func readFlow(cmd *cobra.Command, arg string) (name string, data []byte, err error) {
	if arg == "-" {
		data, err = readlimit.Reader(cmd.InOrStdin(), stdinName, flow.MaxFileSize)
		if err != nil {
			return "", nil, usageError(err)
		}
		return stdinName, data, nil
	}
	data, err = readlimit.File(arg, flow.MaxFileSize)
	if err != nil {
		return "", nil, usageError(err)
	}
	return arg, data, nil
}

func newStatus() *cobra.Command {
	var output, task, ctl, after string
	var states []string
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "status [FLOW]",
		Short: "Show all flows, or one flow's tasks and attempts, a page at a time",
		Long: `status without FLOW lists the flows. With FLOW it shows the flow, the counts of its tasks
by state, why tasks wait, and a page of its tasks with their attempts: the first --limit
(100), in the flow's order, after --after's task, of the --state given (a task state, or
waiting; a list, or the flag given again). It says how many more there are and how to see
them. --all (or --limit 0) shows every task, asked for a page at a time.`,
		Example: `  controller status
  controller status hello-x1y2z3
  controller status hello-x1y2z3 --state failed,waiting
  controller status hello-x1y2z3 --after hello-x1y2z3/t0099   # the next page
  controller status hello-x1y2z3 --all -o json
  controller status hello-x1y2z3 --task greet   # each attempt with the prompt it got`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkControllerID(ctl); err != nil {
				return err
			}
			if all {
				limit = 0
			}
			if limit < 0 {
				return usageError(fmt.Errorf("--limit must be 0 (every task) or more (got %d)", limit))
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if id == "" && (task != "" || after != "" || len(states) > 0 || cmd.Flags().Changed("limit") || all) {
				return usageError(fmt.Errorf("--task, --state, --after, --limit and --all need a FLOW argument"))
			}
			nc, err := connect(cmd)
			if err != nil {
				return err
			}
			defer nc.Close()
			cl := &controller.Client{NC: nc, Controller: ctl}
			out := cmd.OutOrStdout()
			switch {
			case id == "":
				st, err := cl.Status(cmd.Context(), "")
				if err != nil {
					return err
				}
				return printAs(out, output, st, func() { printStatus(out, st) })
			case task != "":
				st, err := cl.StatusPage(cmd.Context(), controller.StatusRequest{Flow: id, Limit: 1, Tasks: []string{task}})
				if err != nil {
					return err
				}
				return printAs(out, output, st, func() {}, func() error { return printTask(out, st.Detail, task) })
			}
			req := controller.StatusRequest{Flow: id, Limit: limit, After: after, States: states}
			if limit == 0 {
				req.Limit = controller.MaxPageLimit
				return walkStatus(cmd.Context(), cl, req, out, output)
			}
			st, err := cl.StatusPage(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printAs(out, output, st, func() { printStatus(out, st); printMore(out, req, st.Detail.Page, len(st.Detail.Tasks)) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&task, "task", "", "show one task: its attempts, errors, checks and the prompt each attempt got")
	cmd.Flags().IntVar(&limit, "limit", controller.DefaultPageLimit, "tasks shown: a page of up to this many (0: every task)")
	cmd.Flags().BoolVar(&all, "all", false, "every task (--limit 0), asked for a page at a time")
	cmd.Flags().StringVar(&after, "after", "", "start after this task, FLOW/TASK (a page's next)")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only tasks in these states: "+strings.Join(stateNames(), ", ")+", or waiting")
	controllerFlag(cmd, &ctl)
	return cmd
}

// stateNames are the task states, as --state takes them.
func stateNames() []string {
	var out []string
	for _, s := range controller.TaskStates() {
		out = append(out, string(s))
	}
	return out
}

// printAs prints v as JSON, or calls text (then each of the rest, which may fail).
func printAs(out io.Writer, output string, v any, text func(), more ...func() error) error {
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text()
	for _, fn := range more {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// printMore says how many of the flow's tasks a page did not show, and how
// to see them.
func printMore(out io.Writer, req controller.StatusRequest, p *controller.TaskPage, shown int) {
	filter := ""
	if len(req.States) > 0 {
		filter = " --state " + strings.Join(req.States, ",")
	}
	what := "tasks"
	if filter != "" {
		what = "tasks in " + strings.Join(req.States, ", ")
	}
	fmt.Fprintf(out, "\n%s %d–%d of %d %s", "shown:", min(p.Before+1, p.Before+shown), p.Before+shown, p.Matching, what)
	if more := p.After(shown); more > 0 && p.Next != "" {
		fmt.Fprintf(out, "; %d more: controller status %s --after %s%s (or --all)", more, termsafe.Line(req.Flow), termsafe.Line(p.Next), filter)
	}
	fmt.Fprintln(out)
}

// walkStatus shows every task of req's flow (in its states), asked for
// a page at a time: as text, the tables of all; as JSON, one answer of
// the shape a page has, holding them all.
func walkStatus(ctx context.Context, cl *controller.Client, req controller.StatusRequest, out io.Writer, output string) error {
	var all *controller.StatusResponse
	err := cl.WalkTasks(ctx, req, func(st *controller.StatusResponse) error {
		if all == nil {
			all = st
			d := *st.Detail
			all.Detail = &d
			return nil
		}
		mergePage(all.Detail, st.Detail)
		all.Applied, all.Cooldowns, all.Unserved = st.Applied, st.Cooldowns, st.Unserved
		return nil
	})
	if err != nil {
		return err
	}
	p := *all.Detail.Page
	p.Before, p.Next = 0, ""
	all.Detail.Page = &p
	return printAs(out, output, all, func() { printStatus(out, all); printMore(out, req, &p, len(all.Detail.Tasks)) })
}

// mergePage adds a page's tasks to what a walk holds, and takes its
// summary (the latest).
func mergePage(into, d *controller.FlowDetail) {
	into.Tasks = append(into.Tasks, d.Tasks...)
	into.Attempts = append(into.Attempts, d.Attempts...)
	into.Flow.Spec.Tasks = append(into.Flow.Spec.Tasks, d.Flow.Spec.Tasks...)
	for k, v := range d.TaskSpend {
		if into.TaskSpend == nil {
			into.TaskSpend = map[string]*controller.SpendStatus{}
		}
		into.TaskSpend[k] = v
	}
	for k, v := range d.Waiting {
		if into.Waiting == nil {
			into.Waiting = map[string]*controller.WaitStatus{}
		}
		into.Waiting[k] = v
	}
	into.Page = d.Page
	into.Spend = d.Spend
}

func printStatus(out io.Writer, st *controller.StatusResponse) {
	// Every field is escaped: names, repos, errors and reasons come from
	// flow files, agents and operators.
	l := termsafe.Line
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if st.Detail == nil {
		fmt.Fprintln(tw, "FLOW\tSTATE\tTASKS\tSUBMITTED\tSPEND")
		for _, f := range st.Flows {
			var parts []string
			for s, n := range f.Tasks {
				parts = append(parts, fmt.Sprintf("%s=%d", s, n))
			}
			sort.Strings(parts)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l(f.ID), l(string(f.State)), l(strings.Join(parts, " ")), f.SubmittedAt.Local().Format(time.DateTime),
				controller.SpendLine(f.Spend))
		}
		printCooldowns(tw, st.Cooldowns)
		printUnserved(tw, st.Unserved)
		return
	}
	d := st.Detail
	fmt.Fprintf(tw, "flow %s (%s): %s, repo %s @ %s\n", l(d.Flow.ID), l(d.Flow.Spec.Name), l(string(d.Flow.State)), l(d.Flow.Spec.Repo), l(d.Flow.Spec.Base))
	if line := controller.SpendLine(d.Spend); line != "" {
		fmt.Fprintln(tw, line)
	}
	if d.Flow.Paused {
		fmt.Fprintln(tw, "paused: no new attempt starts until `controller resume`")
	}
	if c := d.Flow.Cancel; c != nil {
		fmt.Fprintf(tw, "cancel requested at %s %s\n", c.At.Local().Format(time.DateTime), l(c.Reason))
	}
	if in := d.Flow.Integration; in != nil {
		fmt.Fprintf(tw, "integration %s %s %s", l(in.Branch), l(string(in.State)), l(in.Commit))
		if in.Error != nil {
			fmt.Fprintf(tw, " %s: %s", l(string(in.Error.Class)), l(in.Error.Message))
		}
		fmt.Fprintln(tw)
	}
	printPR(tw, d)
	if p := d.Page; p != nil {
		fmt.Fprintf(tw, "tasks: %d: %s\n", p.Tasks, countsLine(p))
		for _, w := range p.Waits {
			fmt.Fprintf(tw, "waiting: %d task(s) since %s (first %s): %s\n", w.Tasks, w.Since.Local().Format(time.DateTime), l(w.First), l(oneLine(w.Reason, 300)))
		}
		if n := p.Waiting - waitsListed(p.Waits); n > 0 {
			fmt.Fprintf(tw, "waiting: %d more task(s), for other reasons (--state waiting)\n", n)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "TASK\tSTATE\tRUNTIME\tATTEMPTS\tRESULT / ERROR")
	for _, t := range d.Tasks {
		detail := t.ResultBranch
		if t.Error != nil {
			detail = t.Error.Message
		}
		if t.BlockedBy != "" {
			detail = "blocked by " + t.BlockedBy
		}
		if r := t.Retry; r != nil {
			detail = fmt.Sprintf("retry %d on %s at %s", r.N, r.Runtime, r.DueAt.Local().Format("15:04:05"))
		}
		if w := waitOf(d, t); w != nil {
			detail = "waits: " + w.Reason
		}
		if s := d.TaskSpend[t.ID]; s != nil && s.Budget.Limited() {
			detail += " [" + controller.SpendLine(s) + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", l(t.ID), l(string(t.State)), l(t.Runtime), t.Attempts, l(detail))
	}
	fmt.Fprintln(tw, "\nATTEMPT\tSTATE\tWORKER\tEPOCH\tEXIT\tFILES\tTOKENS IN/OUT")
	for _, a := range d.Attempts {
		exit, files, toks := "", "", ""
		if r := a.Report; r != nil {
			exit = fmt.Sprint(r.ExitCode)
			files = fmt.Sprintf("+%d ~%d -%d", len(r.FilesCreated), len(r.FilesModified), len(r.FilesDeleted))
			toks = "unknown"
			if u := r.Usage; u.Known() {
				toks = tokens(u.InputTokens) + "/" + tokens(u.OutputTokens)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l(a.ID), l(string(a.State)), l(a.Worker), a.Epoch, exit, files, toks)
	}
	printCooldowns(tw, st.Cooldowns)
	printUnserved(tw, st.Unserved)
}

// waitsListed is the number of tasks of the waits a page lists.
func waitsListed(ws []controller.WaitGroup) int {
	n := 0
	for _, w := range ws {
		n += w.Tasks
	}
	return n
}

// waitOf is why a task waits: what the controller says, else (an older
// controller) the cooldowns the task records; nil when it does not wait.
func waitOf(d *controller.FlowDetail, t *projection.Task) *controller.WaitStatus {
	if w := d.Waiting[t.ID]; w != nil {
		return w
	}
	if w := t.Waiting(); w != nil {
		return &controller.WaitStatus{Reason: w.Reason, Since: w.Since}
	}
	return nil
}

// printUnserved lists the pools' runtimes no live worker serves, for which
// attempts wait, and why.
func printUnserved(tw io.Writer, ps []controller.PlacementStatus) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nNO WORKER\tPOOL\tSINCE\tWHY")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termsafe.Line(p.Runtime), termsafe.Line(p.Pool), p.Since.Local().Format(time.DateTime),
			termsafe.Line(oneLine(p.Reason, 300)))
	}
}

// printCooldowns lists the cooldowns holding back runtimes, models and
// credentials across the fleet, with their end and cause.
func printCooldowns(tw io.Writer, cds []controller.CooldownStatus) {
	if len(cds) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nCOOLDOWN\tSTATE\tUNTIL\tSTEP\tPROBE\tCAUSE")
	for _, c := range cds {
		what := c.Key
		if len(c.Runtimes) > 0 {
			what += " (" + strings.Join(c.Runtimes, ", ") + ")"
		}
		cause := fmt.Sprintf("%s on %s (%s", c.Class, c.Runtime, c.Source)
		if c.Limited > 1 {
			cause += fmt.Sprintf(", %d attempts limited", c.Limited)
		}
		cause += "): " + c.Cause
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", what, c.State, c.Until.Local().Format(time.DateTime), c.Step, c.Probe, oneLine(cause, 160))
	}
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// checkOutput checks a command's -o.
func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return usageError(fmt.Errorf("-o must be text or json (got %q)", output))
	}
	return nil
}
