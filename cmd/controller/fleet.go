package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/termsafe"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// registrations reads the worker registrations from NATS.
func registrations(cmd *cobra.Command) ([]*fleet.Registration, error) {
	var ws []*fleet.Registration
	err := withJetStream(cmd, func(js jetstream.JetStream) (err error) {
		ws, err = fleet.Workers(cmd.Context(), js)
		return err
	})
	return ws, err
}

// withJetStream connects to NATS as the command's configuration says and
// runs fn with JetStream on that connection.
func withJetStream(cmd *cobra.Command, fn func(jetstream.JetStream) error) error {
	nc, err := connect(cmd)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return fn(js)
}

func newWorkers() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "workers",
		Short:   "List the live workers: host, pool, load, runtimes and versions, last heartbeat",
		Example: "  controller workers\n  controller workers -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			ws, err := registrations(cmd)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(ws)
			}
			// Registrations are written by whoever holds a worker credential,
			// and versions are what a CLI printed: every field is escaped.
			l := termsafe.Line
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tHOST\tPOOL\tBUSY\tRUNTIMES (healthy)\tSANDBOX\tLAST SEEN\tNOT CLAIMING")
			for _, w := range ws {
				var rts []string
				for _, r := range w.Runtimes {
					if r.Healthy {
						rts = append(rts, runtimeLabel(r))
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", l(w.ID), l(w.Host), l(w.Pool), busy(w),
					l(strings.Join(rts, ", ")), l(sandboxColumn(w.Sandbox)), time.Since(w.Seen).Round(time.Second), l(w.NotClaiming))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// newRuntimeCmd is `controller runtime`: the fleet's runtimes, their
// health, and how a flow's tasks resolve them.
func newRuntimeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "The fleet's runtimes as the workers report them, and how tasks resolve them"}
	cmd.AddCommand(newRuntimeList(), newRuntimeHealth(), newResolve())
	return cmd
}

func newRuntimeList() *cobra.Command {
	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "Each runtime with the workers that serve it healthy, and its versions",
		Example: "  controller runtime list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			ws, err := registrations(cmd)
			if err != nil {
				return err
			}
			type row struct {
				Runtime string `json:"runtime"`
				Adapter string `json:"adapter,omitempty"`
				// A native runtime's model API and model, as its first
				// worker reports them.
				Provider     string          `json:"provider,omitempty"`
				Model        string          `json:"model,omitempty"`
				Capabilities json.RawMessage `json:"capabilities,omitempty"`
				Workers      []string        `json:"workers"`
				Versions     []string        `json:"versions"`
			}
			byName := map[string]*row{}
			for _, w := range ws {
				for _, r := range w.Runtimes {
					if !r.Healthy {
						continue
					}
					rw := byName[r.Name]
					if rw == nil {
						rw = &row{Runtime: r.Name, Adapter: r.Adapter, Provider: r.Provider, Model: r.Model, Capabilities: r.Capabilities}
						byName[r.Name] = rw
					}
					rw.Workers = append(rw.Workers, w.ID)
					if r.Version != "" && !slices.Contains(rw.Versions, r.Version) {
						rw.Versions = append(rw.Versions, r.Version)
					}
				}
			}
			rows := make([]*row, 0, len(byName))
			for _, r := range byName {
				rows = append(rows, r)
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i].Runtime < rows[j].Runtime })
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "RUNTIME\tADAPTER\tPROVIDER\tCAPABILITIES\tWORKERS\tVERSIONS")
			l := termsafe.Line
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l(r.Runtime), l(r.Adapter), l(r.Provider), l(capabilities(r.Capabilities)),
					l(strings.Join(r.Workers, ", ")), l(strings.Join(r.Versions, ", ")))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return list
}

func newRuntimeHealth() *cobra.Command {
	var hOutput string
	health := &cobra.Command{
		Use:     "health",
		Short:   "Every runtime on every worker: healthy or why not",
		Example: "  controller runtime health -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(hOutput); err != nil {
				return err
			}
			ws, err := registrations(cmd)
			if err != nil {
				return err
			}
			// The cooldowns are the controller's: without one answering,
			// the workers' health is still worth showing.
			var cds []controller.CooldownStatus
			cdErr := withClient(cmd, func(cl *controller.Client) error {
				st, err := cl.Status(cmd.Context(), "")
				if err == nil {
					cds = st.Cooldowns
				}
				return err
			})
			if hOutput == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Workers   []*fleet.Registration       `json:"workers"`
					Cooldowns []controller.CooldownStatus `json:"cooldowns"`
				}{ws, cds})
			}
			printHealth(cmd.OutOrStdout(), ws)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			printCooldowns(tw, cds)
			if cdErr != nil {
				fmt.Fprintf(tw, "\ncooldowns unknown: %v\n", cdErr)
			}
			return tw.Flush()
		},
	}
	health.Flags().StringVarP(&hOutput, "output", "o", "text", "output format: text or json")
	return health
}

func printHealth(out io.Writer, ws []*fleet.Registration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "WORKER\tRUNTIME\tADAPTER\tHEALTHY\tVERSION\tCHECKED\tERROR")
	l := termsafe.Line
	for _, w := range ws {
		for _, r := range w.Runtimes {
			adapterName := r.Adapter
			if r.Provider != "" {
				adapterName += " " + r.Provider
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s ago\t%s\n", l(w.ID), l(r.Name), l(adapterName), r.Healthy, l(r.Version),
				time.Since(r.Checked).Round(time.Second), l(r.Error))
		}
	}
}

// runtimeLabel is a healthy runtime in the workers table: its name and
// version, and a native runtime's provider (its version is its model).
func runtimeLabel(r fleet.RuntimeHealth) string {
	label := strings.TrimSpace(r.Name + " " + r.Version)
	if r.Provider != "" {
		label += " (" + r.Provider + ")"
	}
	return label
}

// capabilities are a runtime's capabilities in a few words: those it has,
// and the models it lists. Registrations come from outside: what does not
// decode shows as "?".
func capabilities(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var c adapter.Capabilities
	if json.Unmarshal(raw, &c) != nil {
		return "?"
	}
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{c.SupportsModel, "model"}, {c.SupportsNonInteractive, "headless"}, {c.SupportsPromptFileInclusion, "prompt-file"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if len(c.AvailableModels) > 0 {
		out = append(out, "models: "+strings.Join(c.AvailableModels, " "))
	}
	return strings.Join(out, ", ")
}

// sandboxColumn shortens a worker's sandbox state for the table: the
// reason it is off or unavailable is in -o json and in NOT CLAIMING.
func sandboxColumn(s string) string {
	switch {
	case s == "":
		return "-" // a worker from before sandboxes
	case strings.HasPrefix(s, "off"):
		return "OFF"
	case strings.HasPrefix(s, "unavailable"):
		return "UNAVAILABLE"
	}
	if i := strings.IndexByte(s, ':'); i > 0 {
		return s[:i] // "landlock ABI 7"
	}
	return s
}

// busy is a worker's attempts in its slots over its slots, and those
// finishing (pushing, reporting) outside them.
func busy(w *fleet.Registration) string {
	s := fmt.Sprintf("%d/%d", w.Busy, w.Slots)
	if w.Finishing > 0 {
		s += fmt.Sprintf(" +%d finishing", w.Finishing)
	}
	return s
}
