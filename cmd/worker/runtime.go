package main

import (
	"encoding/json"
	"fmt"
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

func newRuntime() *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Inspect the runtimes configured on this host"}
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
			// config: by its config keys (config.Runtime.MarshalJSON);
			// env_passed: the worker's variables the CLI may see, the base
			// list and the runtime's; key_variables: those its provider
			// configuration names on this host, passed on top.
			type row struct {
				Name         string               `json:"name"`
				Runtime      config.Runtime       `json:"config"`
				EnvPassed    []string             `json:"env_passed"`
				KeyVariables []string             `json:"key_variables,omitempty"`
				Capabilities adapter.Capabilities `json:"capabilities"`
				// What an attempt gets: for a native runtime its model
				// API, tools, scope enforcement and budget.
				Evaluation adapter.Evaluation `json:"evaluation"`
			}
			var rows []row
			for _, name := range cfg.RuntimeNames() {
				rt := cfg.Runtimes[name]
				ad, err := worker.NewAdapter(name, rt)
				if err != nil {
					return err
				}
				rows = append(rows, row{name, rt, adapter.PassedEnv(rt), adapter.HostKeyVariables(rt), ad.Capabilities(), adapter.Evaluate(ad, "")})
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
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
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	var hOutput string
	health := &cobra.Command{
		Use:     "health",
		Short:   "Check each runtime here (binary found, executable, version; native: key set, endpoint answering, model known) and the sandbox; exit 1 if none is healthy or the sandbox is unavailable",
		Example: "  worker runtime health\n  worker runtime health -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(hOutput); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			var rows []*fleet.RuntimeHealth
			healthy := 0
			box, claims := worker.SandboxStatus(cfg, sandbox.Probe)
			for _, name := range cfg.Worker.Runtimes {
				ad, err := worker.NewAdapter(name, cfg.Runtimes[name])
				if err != nil {
					return err
				}
				h := worker.Fingerprint(cmd.Context(), name, cfg.Runtimes[name].Adapter, ad, time.Now())
				h.Sandbox = box
				if h.Healthy {
					healthy++
				}
				rows = append(rows, h)
			}
			if hOutput == "json" {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rows); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "sandbox: %s\n\n", box)
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "RUNTIME\tHEALTHY\tVERSION\tBINARY / ENDPOINT / ERROR")
				// Versions and errors are what the CLIs printed.
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
			if healthy == 0 {
				return exitcode.With(exitcode.Failed, fmt.Errorf("no runtime is healthy on this host"))
			}
			if !claims {
				return exitcode.With(exitcode.Failed, fmt.Errorf("this host cannot confine CLIs, so a worker here claims nothing: %s", box))
			}
			return nil
		},
	}
	health.Flags().StringVarP(&hOutput, "output", "o", "text", "output format: text or json")
	cmd.AddCommand(list, health)
	return cmd
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
