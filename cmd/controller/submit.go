package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/flow"
)

func newSubmit() *cobra.Command {
	var repo string
	var watch bool
	cmd := &cobra.Command{
		Use:   "submit FLOW.yaml",
		Short: "Validate a flow file and submit it",
		Long: `submit validates the flow file (schema, ids, dependencies, runtimes) and sends it to the
controller. A malformed flow is rejected with the file, line and field, exit code 2, and
nothing is recorded. With --watch it follows the flow to its end and exits 0 if it
succeeded, 1 if not.`,
		Example: `  controller submit examples/hello.yaml --watch
  controller submit flow.yaml --repo /srv/git/project.git`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{2, err}
			}
			// Runtimes are checked by the controller, whose configuration is
			// the one that counts; everything else is checked here, with lines.
			spec, err := flow.Parse(args[0], data, flow.Options{
				RepoOverride:   repo,
				DefaultRuntime: cfg.Defaults.Runtime,
			})
			if err != nil {
				return &exitError{2, err}
			}
			nc, err := controller.Connect(cfg)
			if err != nil {
				return err
			}
			defer nc.Close()
			cl := &controller.Client{NC: nc}
			id, err := cl.Submit(cmd.Context(), spec)
			if err != nil {
				var apiErr *controller.APIError
				if errors.As(err, &apiErr) && apiErr.Code == controller.CodeBadRequest {
					return &exitError{2, fmt.Errorf("%s: %w", args[0], err)}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "submitted flow %s (%d tasks)\n", id, len(spec.Tasks))
			if !watch {
				return nil
			}
			return watchFlow(cmd.Context(), cl, id, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "use this repo URL or path instead of the flow file's")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the flow until it ends")
	return cmd
}

func newStatus() *cobra.Command {
	var output, task string
	cmd := &cobra.Command{
		Use:   "status [FLOW]",
		Short: "Show all flows, or one flow's tasks and attempts",
		Example: `  controller status
  controller status hello-x1y2z3
  controller status hello-x1y2z3 -o json
  controller status hello-x1y2z3 --task greet   # each attempt with the prompt it got`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return &exitError{2, fmt.Errorf("-o must be text or json")}
			}
			nc, err := connect(cmd)
			if err != nil {
				return err
			}
			defer nc.Close()
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			st, err := (&controller.Client{NC: nc}).Status(cmd.Context(), id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if task != "" && st.Detail == nil {
				return &exitError{2, fmt.Errorf("--task needs a FLOW argument")}
			}
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			if task != "" {
				return printTask(out, st.Detail, task)
			}
			printStatus(out, st)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&task, "task", "", "show one task: its attempts, errors, checks and the prompt each attempt got")
	return cmd
}

func printStatus(out io.Writer, st *controller.StatusResponse) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if st.Detail == nil {
		fmt.Fprintln(tw, "FLOW\tSTATE\tTASKS\tSUBMITTED")
		for _, f := range st.Flows {
			var parts []string
			for s, n := range f.Tasks {
				parts = append(parts, fmt.Sprintf("%s=%d", s, n))
			}
			sort.Strings(parts)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.ID, f.State, strings.Join(parts, " "), f.SubmittedAt.Local().Format(time.DateTime))
		}
		return
	}
	d := st.Detail
	fmt.Fprintf(tw, "flow %s (%s): %s, repo %s @ %s\n", d.Flow.ID, d.Flow.Spec.Name, d.Flow.State, d.Flow.Spec.Repo, d.Flow.Spec.Base)
	if d.Flow.Paused {
		fmt.Fprintln(tw, "paused: no new attempt starts until `controller resume`")
	}
	if c := d.Flow.Cancel; c != nil {
		fmt.Fprintf(tw, "cancel requested at %s %s\n", c.At.Local().Format(time.DateTime), c.Reason)
	}
	if in := d.Flow.Integration; in != nil {
		fmt.Fprintf(tw, "integration %s %s %s", in.Branch, in.State, in.Commit)
		if in.Error != nil {
			fmt.Fprintf(tw, " %s: %s", in.Error.Class, in.Error.Message)
		}
		fmt.Fprintln(tw)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", t.ID, t.State, t.Runtime, t.Attempts, detail)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.ID, a.State, a.Worker, a.Epoch, exit, files, toks)
	}
}
