package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/leadership"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newControllers() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "controllers",
		Short: "List the controllers: which leads, each one's epoch, how far it has folded the log, last seen",
		Long: `controllers lists every running controller from the drover-controllers registry. ROLE is
leader for the controller holding the leader lease now, standby for the others; EPOCH
is the latest leader epoch each has folded; FOLDED the stream sequence its projection
has applied and LAG how many events it was behind the stream, as of LAST SEEN (each
renews its entry every 2s).`,
		Example: "  controller controllers\n  controller controllers -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cs, err := controllerList(cmd)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(cs)
			}
			// Registrations are written by whoever holds a controller
			// credential: every field is escaped.
			l := termsafe.Line
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CONTROLLER\tROLE\tEPOCH\tFOLDED\tLAG\tLAST SEEN\tHOST")
			for _, c := range cs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s ago\t%s\n", l(c.ID), l(c.Role), c.Epoch, c.Applied, c.Lag,
					time.Since(c.Seen).Round(time.Second), l(c.Host))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// controllerList reads the registered controllers, each one's role taken
// from the lease: a leader that was paused still says it leads until it
// renews its entry.
func controllerList(cmd *cobra.Command) ([]*fleet.Controller, error) {
	var cs []*fleet.Controller
	err := withJetStream(cmd, func(js jetstream.JetStream) error {
		var err error
		if cs, err = fleet.Controllers(cmd.Context(), js); err != nil {
			return err
		}
		holder, err := leadership.Holder(cmd.Context(), js)
		if err != nil {
			return err
		}
		for _, c := range cs {
			c.Role = fleet.RoleStandby
			if c.ID == holder {
				c.Role = fleet.RoleLeader
			}
		}
		return nil
	})
	return cs, err
}

// controllerFlag adds --controller, which sends a read to one controller.
func controllerFlag(cmd *cobra.Command, id *string) {
	cmd.Flags().StringVar(id, "controller", "", "ask this controller (an id `controller controllers` lists) about its own projection; default: any")
}

// checkControllerID refuses a --controller that is no id: it goes into a
// subject.
func checkControllerID(id string) error {
	if id == "" {
		return nil
	}
	if err := drovertype.ValidID(id); err != nil {
		return usageError(fmt.Errorf("--controller: %w", err))
	}
	return nil
}
