package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, queue.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 || limit <= 0 {
		return nil, nil
	}
	start := info.State.FirstSeq
	if info.State.Msgs > uint64(limit) {
		start = info.State.LastSeq - uint64(limit) + 1
	}
	cons, err := js.OrderedConsumer(ctx, queue.DeadLetterStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	for len(out) < limit {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			return nil, err
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, err
		}
		size, _ := strconv.Atoi(msg.Headers().Get(queue.DeadLetterSizeHeader))
		out = append(out, deadLetter{
			Seq: md.Sequence.Stream, Time: md.Timestamp, Source: strings.TrimPrefix(msg.Subject(), queue.DeadLetterSubject("")),
			Reason: msg.Headers().Get(queue.DeadLetterReasonHeader), Size: size, Kept: len(msg.Data()), Preview: preview(msg.Data(), 80),
		})
		if md.NumPending == 0 {
			break
		}
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
