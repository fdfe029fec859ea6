package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newEvents() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "events FLOW",
		Short:   "Print a flow's events from the EVENTS stream, in order",
		Example: "  controller events hello-x1y2z3\n  controller events hello-x1y2z3 -o json | jq .type",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			// The id becomes a subject filter: "*" or "a.>" would read
			// other flows' events.
			if err := drovertype.ValidID(args[0]); err != nil {
				return usageError(fmt.Errorf("flow id %q: %v", args[0], err))
			}
			nc, err := connect(cmd)
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			return printEvents(cmd.Context(), js, args[0], output, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (one event per line)")
	return cmd
}

// printEvents reads the flow's events that exist now and stops at the end.
func printEvents(ctx context.Context, js jetstream.JetStream, flowID, output string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.FlowEventsFilter(flowID)},
	})
	if err != nil {
		return err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	if info.NumPending == 0 {
		return notFound(fmt.Errorf("no events for flow %q", flowID))
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		ev, err := event.Decode(msg.Data())
		switch {
		case err != nil:
			// Whoever can publish on the subject wrote these bytes.
			fmt.Fprintf(w, "%6d  undecodable: %s\n", md.Sequence.Stream, termsafe.Line(err.Error()))
		case output == "json":
			line, _ := json.Marshal(struct {
				Seq uint64 `json:"seq"`
				*event.Event
			}{md.Sequence.Stream, ev})
			fmt.Fprintf(w, "%s\n", line)
		default:
			who := ev.Task
			if ev.Attempt != "" {
				who = fmt.Sprintf("%s#%d", ev.Attempt, ev.Epoch)
			}
			fmt.Fprintf(w, "%6d  %s  %-26s %s\n", md.Sequence.Stream, ev.Time.Local().Format("15:04:05.000"), termsafe.Line(string(ev.Type)), termsafe.Line(who))
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

func newRebuild() *cobra.Command {
	var output, ctl string
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Replay the EVENTS stream into an empty store and compare it with the live projection",
		Long: `rebuild asks the running controller to fold the whole EVENTS stream, up to the sequence
its live store has applied, into a fresh Pebble store, and to compare the two byte for
byte. It exits 0 when they are equal and 1 with the differences when not. With several
controllers, any one answers; --controller asks that one about its own projection.`,
		Example: `  controller rebuild
  controller rebuild -o json | jq .equal
  controller rebuild --controller ctl-b-x1y2z3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkControllerID(ctl); err != nil {
				return err
			}
			nc, err := connect(cmd)
			if err != nil {
				return err
			}
			defer nc.Close()
			res, err := (&controller.Client{NC: nc, Controller: ctl}).Rebuild(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "replayed %d events (seq 1..%d) into %d records in %dms\n", res.Events, res.RebuiltSeq, res.Records, res.Millis)
				for _, d := range res.Diffs {
					fmt.Fprintln(out, termsafe.Line(d))
				}
				if res.Equal {
					fmt.Fprintln(out, "rebuilt projection equals the live projection")
				}
			}
			if !res.Equal {
				return failed(fmt.Errorf("rebuilt projection differs from the live one (%d differences shown)", len(res.Diffs)))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	controllerFlag(cmd, &ctl)
	return cmd
}
