package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/termsafe"
)

// deadLetter is one parked message as `controller dead-letters` shows it.
type deadLetter struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Source  string    `json:"source"`
	Reason  string    `json:"reason"`
	Size    int       `json:"size"`    // bytes of the original message
	Kept    int       `json:"kept"`    // bytes parked (a huge message is cut)
	Preview string    `json:"preview"` // the start of the message, escaped
}

func newDeadLetters() *cobra.Command {
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List the poison messages that were parked instead of processed",
		Long: `dead-letters lists the DROVER_DEADLETTER stream, newest last: messages that could not be
decoded or were refused (undecodable jobs, wrong versions, oversized or unknown ids), with
where they came from, why they were refused, and the start of their bytes. Poison events on
the EVENTS stream are also counted by ` + "`controller status`" + ` (poison_events).`,
		Example: `  controller dead-letters
  controller dead-letters --limit 5 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if limit < 1 || limit > maxDeadLetters {
				return usageError(fmt.Errorf("--limit must be 1..%d (got %d)", maxDeadLetters, limit))
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
			dls, err := readDeadLetters(cmd.Context(), js, limit)
			if err != nil {
				return err
			}
			return printDeadLetters(cmd.OutOrStdout(), dls, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().IntVar(&limit, "limit", 100, fmt.Sprintf("show at most this many, the newest (1..%d)", maxDeadLetters))
	return cmd
}

// maxDeadLetters bounds --limit: each is read from the stream and kept
// until printed.
const maxDeadLetters = 10_000

// readDeadLetters reads the last limit messages of the dead-letter stream.
func readDeadLetters(ctx context.Context, js jetstream.JetStream, limit int) ([]deadLetter, error) {
	dls, err := queue.ReadDeadLetters(ctx, js, limit)
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	for _, d := range dls {
		out = append(out, deadLetter{Seq: d.Seq, Time: d.Time, Source: d.Source, Reason: d.Reason, Size: d.Size,
			Kept: len(d.Data), Preview: preview(d.Data, 80)})
	}
	return out, nil
}

// preview is the start of b as one printable line: control bytes and
// invalid UTF-8 are escaped, so a hostile message cannot drive the terminal.
func preview(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return termsafe.Line(string(b))
}

func printDeadLetters(w io.Writer, dls []deadLetter, output string) error {
	if output == "json" {
		if dls == nil {
			dls = []deadLetter{}
		}
		return json.NewEncoder(w).Encode(dls)
	}
	if len(dls) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSOURCE\tSIZE\tREASON\tSTART")
	for _, d := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", d.Seq, d.Time.Local().Format(time.DateTime), termsafe.Line(d.Source), d.Size,
			preview([]byte(d.Reason), 120), d.Preview)
	}
	return tw.Flush()
}
