package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/termsafe"
	"github.com/drover-dev/drover/internal/worker"
)

// newRuntime is `worker runtime`: its list and health of this host's
// runtimes.
func newRuntime() *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Inspect the runtimes configured on this host"}
	cmd.AddCommand(newRuntimeList(), newRuntimeHealth())
	return cmd
}

func newRuntimeList() *cobra.Command {
	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the configured runtimes with their argv, input, output format and capabilities",
		Example: "  worker runtime list\n  worker runtime list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			rows, err := runtimeRows(cfg)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			return printRuntimes(cmd.OutOrStdout(), rows)
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return list
}

// runtimeRow is one runtime of `worker runtime list`. Runtime is by its
// config keys (config.Runtime.MarshalJSON); EnvPassed the worker's
// variables the CLI may see, the base list and the runtime's; KeyVariables
// those its provider configuration names on this host, passed on top.
type runtimeRow struct {
	Name         string               `json:"name"`
	Runtime      config.Runtime       `json:"config"`
	EnvPassed    []string             `json:"env_passed"`
	KeyVariables []string             `json:"key_variables,omitempty"`
	Capabilities adapter.Capabilities `json:"capabilities"`
	// What an attempt gets: for a native runtime its model API, tools,
	// scope enforcement and budget.
	Evaluation adapter.Evaluation `json:"evaluation"`
}

// runtimeRows describes every configured runtime.
func runtimeRows(cfg *config.Config) ([]runtimeRow, error) {
	var rows []runtimeRow
	for _, name := range cfg.RuntimeNames() {
		rt := cfg.Runtimes[name]
		ad, err := worker.NewAdapter(name, rt)
		if err != nil {
			return nil, err
		}
		rows = append(rows, runtimeRow{name, rt, adapter.PassedEnv(rt), adapter.HostKeyVariables(rt), ad.Capabilities(), adapter.Evaluate(ad, "")})
	}
	return rows, nil
}

// printRuntimes is `worker runtime list`'s table.
func printRuntimes(w io.Writer, rows []runtimeRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNTIME\tADAPTER\tBINARY / ENDPOINT\tINPUT\tOUTPUT\tMODEL")
	l := termsafe.Line
	for _, r := range rows {
		bin, input, out := r.Runtime.Binary, r.Runtime.Input, string(r.Runtime.Output)
		if r.Runtime.Adapter == "native" {
			// No CLI: the model API it talks to, the prompt as the
			// first message, its own events as output.
			bin, input, out = r.Runtime.Provider+" "+r.Runtime.BaseURL, "message", "native-events"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l(r.Name), l(r.Runtime.Adapter), l(bin), l(input), l(out), l(r.Runtime.Model))
	}
	return tw.Flush()
}

func newRuntimeHealth() *cobra.Command {
	var output string
	health := &cobra.Command{
		Use:     "health",
		Short:   "Check each runtime here (binary found, executable, version; native: key set, endpoint answering, model known) and the sandbox; exit 1 if none is healthy or the sandbox is unavailable",
		Example: "  worker runtime health\n  worker runtime health -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			box, claims := worker.SandboxStatus(cfg, sandbox.Probe)
			rows, err := healthRows(cmd.Context(), cfg, box)
			if err != nil {
				return err
			}
			if output == "json" {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rows); err != nil {
					return err
				}
			} else {
				printHealth(cmd.OutOrStdout(), box, rows)
			}
			if !slices.ContainsFunc(rows, func(h *fleet.RuntimeHealth) bool { return h.Healthy }) {
				return exitcode.With(exitcode.Failed, fmt.Errorf("no runtime is healthy on this host"))
			}
			if !claims {
				return exitcode.With(exitcode.Failed, fmt.Errorf("this host cannot confine CLIs, so a worker here claims nothing: %s", box))
			}
			return nil
		},
	}
	health.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return health
}

// healthRows checks each runtime this worker serves, under the sandbox box.
func healthRows(ctx context.Context, cfg *config.Config, box string) ([]*fleet.RuntimeHealth, error) {
	var rows []*fleet.RuntimeHealth
	for _, name := range cfg.Worker.Runtimes {
		ad, err := worker.NewAdapter(name, cfg.Runtimes[name])
		if err != nil {
			return nil, err
		}
		h := worker.Fingerprint(ctx, name, cfg.Runtimes[name].Adapter, ad, time.Now())
		h.Sandbox = box
		rows = append(rows, h)
	}
	return rows, nil
}

// printHealth is `worker runtime health`'s table. Versions and errors are
// what the CLIs printed.
func printHealth(w io.Writer, box string, rows []*fleet.RuntimeHealth) {
	fmt.Fprintf(w, "sandbox: %s\n\n", box)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNTIME\tHEALTHY\tVERSION\tBINARY / ENDPOINT / ERROR")
	l := termsafe.Line
	for _, r := range rows {
		detail := r.Binary
		if !r.Healthy {
			detail = r.Error
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", l(r.Name), r.Healthy, l(r.Version), l(detail))
	}
	_ = tw.Flush()
}

// checkOutput checks a command's -o.
func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return exitcode.With(exitcode.Usage, fmt.Errorf("-o must be text or json (got %q)", output))
	}
	return nil
}

func loadConfig(cmd *cobra.Command) (*config.Config, error) {
	file, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(config.LoadOptions{File: file, Flags: cmd.Flags(), Bind: config.FlagBindings})
	if err != nil {
		return nil, err
	}
	if err := natsconn.CheckConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}
