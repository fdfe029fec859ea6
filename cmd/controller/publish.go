package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newPublish() *cobra.Command {
	var output, reason string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "publish FLOW [--dry-run]",
		Short: "Open or update an ended flow's pull request now",
		Long: `publish asks the controller to open the flow's pull request from its integration branch
(GitHub, GitLab or Gitea, as its publish section says), or to update the one it opened
before, with a body listing each task with its runtime, attempts, checks, tokens and cost.
A flow with a publish section is published when it ends by itself; publish is for one that
was not (a token the forge refused, on: success with a flow that failed in part). The flow
needs a publish section (docs/forges.md). --dry-run prints the title and body and records
nothing.`,
		Example: `  controller publish hello-x1y2z3 --dry-run
  controller publish hello-x1y2z3 --reason "token fixed"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if _, err := controller.ParseTarget(args[0]); err != nil {
				return usageError(err)
			}
			return withClient(cmd, func(cl *controller.Client) error {
				resp, err := cl.Publish(cmd.Context(), controller.PublishRequest{Target: args[0], Reason: reason, DryRun: dryRun})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if output == "json" {
					return json.NewEncoder(out).Encode(resp)
				}
				fmt.Fprintln(out, termsafe.Text(resp.Message))
				if dryRun {
					fmt.Fprintf(out, "\ntitle: %s\n\n%s", termsafe.Line(resp.Title), termsafe.Text(resp.Body))
					if resp.Comment != "" {
						fmt.Fprintf(out, "\ncomment:\n%s", termsafe.Text(resp.Comment))
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the request")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the pull request's title and body; record nothing")
	return withCompletion(completeFlows, cmd)
}

func newIterate() *cobra.Command {
	return withCompletion(completeFlows, newOperatorCmd("iterate FLOW", "Start a review round of a flow's pull request",
		`iterate starts a round of work on the flow's pull request now: a task on its branch whose
prompt carries what waits on the pull request (reviews that requested changes, failed checks)
and the reason given, whose commits are pushed to the branch, and a comment on the pull
request that says what was done. A round started by hand counts against the flow's budget
but not against max_rounds. The flow must be published and its pull request open.`,
		`  controller iterate hello-x1y2z3 --reason "also update the changelog"`,
		func(ctx context.Context, cl *controller.Client, target, reason string) (*controller.OperatorResponse, error) {
			return cl.Iterate(ctx, target, reason)
		}))
}

// printPR prints a flow's pull request: number, URL, state, checks, each
// review round, and why feedback that waits starts none; escaped, since
// most of it comes from the forge.
func printPR(out io.Writer, d *controller.FlowDetail) {
	f := d.Flow
	pr, l := f.PR, termsafe.Line
	if pr == nil {
		return
	}
	switch {
	case pr.Number > 0:
		fmt.Fprintf(out, "pull request %s#%d on %s: %s %s, %s → %s", l(pr.Repo), pr.Number, l(pr.Forge), l(pr.State), l(pr.URL),
			l(pr.Head), l(pr.Base))
		if c := pr.Checks; c != nil {
			fmt.Fprintf(out, ", checks %d passed, %d failed, %d pending", c.Passed, c.Failed, c.Pending)
			if len(c.Failing) > 0 {
				fmt.Fprintf(out, " (%s)", l(strings.Join(c.Failing, ", ")))
			}
		}
		fmt.Fprintln(out)
	default:
		fmt.Fprintf(out, "pull request on %s %s: not published\n", l(pr.Forge), l(pr.Repo))
	}
	if q := pr.Pending; q != nil {
		fmt.Fprintf(out, "  publish request %d waits for the forge\n", q.N)
	}
	if e := pr.Error; e != nil {
		fmt.Fprintf(out, "  publishing failed: %s: %s\n", l(string(e.Class)), l(e.Message))
	}
	for _, r := range pr.Rounds {
		fmt.Fprintf(out, "  round %d: %s (%s), tasks %s", r.N, l(r.State), l(strings.Join(r.Kinds, ", ")), l(strings.Join(r.Tasks, ", ")))
		if r.Commit != "" {
			fmt.Fprintf(out, ", pushed %s", l(r.Commit))
		}
		fmt.Fprintln(out)
	}
	if n := len(pr.Feedback); n > 0 {
		fmt.Fprintf(out, "  feedback waiting: %d", n)
		switch {
		case d.Spend != nil && d.Spend.Reached != "":
			fmt.Fprintf(out, "; %s: no round starts until it is raised (controller budget)", l(d.Spend.Reached))
		case controller.MaxRoundsReached(f):
			fmt.Fprintf(out, "; max_rounds (%d) reached: `controller iterate` starts another", f.Publish.Iterate.MaxRounds)
		}
		fmt.Fprintln(out)
	}
}
