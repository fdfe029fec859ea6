package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/drover-dev/drover/internal/objstore"
	"io"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/termsafe"
)

func newLogs() *cobra.Command {
	var output string
	var follow, raw bool
	cmd := &cobra.Command{
		Use:   "logs ATTEMPT|FLOW/TASK",
		Short: "Print the output of an attempt's CLI, live while it runs",
		Long: `logs prints what an attempt's coding-agent CLI wrote (stdout and stderr, masked). The target
is an attempt id (FLOW_TASK_N) or FLOW/TASK, which means the task's current (latest) attempt.

Once the attempt has reported, its full log is read from the object store. While it runs,
the output streamed so far is printed; with -f, logs keeps following until the attempt
reports, then exits 0. With -f on a task with no attempt yet, it waits for the first one.
-o json prints one JSON object per chunk: {"attempt", "stream", "offset", "text"}.

The output is the agent's: on a terminal its control characters (escape sequences, carriage
returns, invalid UTF-8) are shown escaped, as \x1b, \r, \xff, so that it cannot drive the
terminal; to a pipe or a file it is written as it is. --raw writes it as it is to a
terminal too.`,
		Example: `  controller logs hello-x1y2z3/greet
  controller logs hello-x1y2z3/greet -f               # follow a running attempt to its end
  controller logs hello-x1y2z3_greet_2                # one attempt in particular
  controller logs hello-x1y2z3/greet -o json | jq -r .text
  controller logs hello-x1y2z3/greet --raw            # the agent's colours, on a terminal you trust it with`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := attemptCommand(output, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "text" && !raw && termsafe.IsTerminal(w) {
				tw := termsafe.NewWriter(w)
				defer tw.Flush()
				w = tw
			}
			return withJS(cmd, func(cl *controller.Client, js jetstream.JetStream) error {
				return printLogs(cmd.Context(), cl, js, t, follow, output, w, cmd.ErrOrStderr())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (one object per chunk)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the attempt reports")
	cmd.Flags().BoolVar(&raw, "raw", false, "write the output's bytes as they are, control characters included, even to a terminal")
	return cmd
}

func newDiff() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diff ATTEMPT|FLOW/TASK",
		Short: "Print the patch an attempt made",
		Long: `diff prints the patch of an attempt's changes (against the commit it started from), read
from the object store. For FLOW/TASK it is the task's result: its succeeded attempt, or
else its latest. When the patch is not in the object store (too old, or never stored), the
report's diff stat is printed instead, with a note on stderr.
-o json prints {"attempt", "stat", "patch"}. The patch holds the agent's file contents: on a
terminal their control characters are shown escaped; to a pipe or a file it is written
byte for byte, for git apply.`,
		Example: `  controller diff hello-x1y2z3/greet
  controller diff hello-x1y2z3_greet_1 | git apply --stat
  controller diff hello-x1y2z3/greet -o json | jq -r .stat`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := attemptCommand(output, args[0])
			if err != nil {
				return err
			}
			return withJS(cmd, func(cl *controller.Client, js jetstream.JetStream) error {
				return printDiff(cmd.Context(), cl, js, t, output, cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// parseAttemptTarget accepts FLOW/TASK or an attempt id, not a bare flow.
func parseAttemptTarget(s string) (controller.Target, error) {
	t, err := controller.ParseTarget(s)
	if err != nil {
		return t, usageError(err)
	}
	if t.Task == "" {
		return t, usageError(fmt.Errorf("%q is a flow: give FLOW/TASK or an attempt id (FLOW_TASK_N)", s))
	}
	return t, nil
}

// attemptCommand checks the arguments of a command about one attempt: its
// -o and its ATTEMPT|FLOW/TASK.
func attemptCommand(output, target string) (controller.Target, error) {
	if err := checkOutput(output); err != nil {
		return controller.Target{}, err
	}
	return parseAttemptTarget(target)
}

// withJS is withClient with a JetStream context on the same connection.
func withJS(cmd *cobra.Command, fn func(cl *controller.Client, js jetstream.JetStream) error) error {
	return withClient(cmd, func(cl *controller.Client) error {
		js, err := jetstream.New(cl.NC)
		if err != nil {
			return err
		}
		return fn(cl, js)
	})
}

// pick chooses the attempt a target names. For FLOW/TASK: with result, the
// task's latest succeeded attempt first; then its current attempt; then its
// latest. It returns nil, nil when the task exists but has no attempt yet.
func pick(ctx context.Context, cl *controller.Client, t controller.Target, result bool) (*projection.Attempt, error) {
	// The task alone, with its attempts: not the whole flow.
	st, err := cl.StatusPage(ctx, controller.StatusRequest{Flow: t.Flow, Limit: 1, Tasks: []string{t.Task}})
	if err != nil {
		return nil, err
	}
	d := st.Detail
	var task *projection.Task
	for _, x := range d.Tasks {
		if x.ID == t.Task {
			task = x
		}
	}
	if task == nil {
		return nil, notFound(fmt.Errorf("flow %s has no task %s", t.Flow, t.Task))
	}
	var current, latest, succeeded *projection.Attempt
	for _, a := range d.Attempts {
		if a.Task != t.Task {
			continue
		}
		if t.Attempt != "" && a.ID == t.Attempt {
			return a, nil
		}
		if a.ID == task.Attempt {
			current = a
		}
		if latest == nil || a.N > latest.N {
			latest = a
		}
		if a.State == drovertype.AttemptSucceeded && (succeeded == nil || a.N > succeeded.N) {
			succeeded = a
		}
	}
	switch {
	case t.Attempt != "":
		return nil, notFound(fmt.Errorf("flow %s has no attempt %s (task %s has %d)", t.Flow, t.Attempt, t.Task, task.Attempts))
	case result && succeeded != nil:
		return succeeded, nil
	case current != nil:
		return current, nil
	}
	return latest, nil
}

// logChunk is one piece of output, as logs -o json prints it.
type logChunk struct {
	Attempt string `json:"attempt"`
	Stream  string `json:"stream"`
	Offset  int64  `json:"offset"`
	Text    string `json:"text"`
}

func printLogs(ctx context.Context, cl *controller.Client, js jetstream.JetStream, t controller.Target, follow bool, output string, w, errw io.Writer) error {
	a, err := pick(ctx, cl, t, false)
	if err != nil {
		return err
	}
	for a == nil {
		if !follow {
			return notFound(fmt.Errorf("task %s/%s has no attempt yet (use -f to wait for it)", t.Flow, t.Task))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if a, err = pick(ctx, cl, t, false); err != nil {
			return err
		}
	}
	emit := func(c logChunk) {
		if output == "json" {
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "%s\n", b)
			return
		}
		io.WriteString(w, c.Text)
	}
	if r := a.Report; r != nil && r.LogObject != "" {
		err := printStoredLog(ctx, js, a.ID, r.LogObject, emit)
		if err == nil {
			return nil
		}
		fmt.Fprintf(errw, "note: the stored log of %s cannot be read (%s); printing the streamed output\n", termsafe.Line(a.ID), termsafe.Line(err.Error()))
	}
	return streamOutput(ctx, cl, js, a, follow, emit)
}

// printStoredLog prints the log object in chunks of whole lines.
func printStoredLog(ctx context.Context, js jetstream.JetStream, attempt, name string, emit func(logChunk)) error {
	rc, err := objstore.NewArtifacts(js).Get(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	var off int64
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			emit(logChunk{Attempt: attempt, Stream: "log", Offset: off, Text: string(buf)})
			off += int64(len(buf))
			buf = buf[:0]
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		buf = append(buf, line...)
		if len(buf) >= 16<<10 {
			flush()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			flush()
			return nil
		}
		if err != nil {
			flush()
			return err
		}
	}
}

// streamOutput prints the attempt's chunks from the OUTPUT stream; with
// follow it goes on until the attempt has reported (or ended without a
// report), then drains what is left.
func streamOutput(ctx context.Context, cl *controller.Client, js jetstream.JetStream, a *projection.Attempt, follow bool, emit func(logChunk)) error {
	cons, err := js.OrderedConsumer(ctx, queue.OutputStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.OutputSubject(a.Flow, a.ID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return err
	}
	ended := func(a *projection.Attempt) bool { return a.Report != nil || a.State.Terminal() }
	done := !follow || ended(a)
	if done {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending == 0 {
			return nil
		}
	}
	lastPoll := time.Now()
	target := controller.Target{Flow: a.Flow, Task: a.Task, Attempt: a.ID}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		switch {
		case err == nil:
			if ev, derr := event.Decode(msg.Data()); derr == nil {
				var c event.OutputChunkData
				if ev.Payload(&c) == nil {
					emit(logChunk{Attempt: a.ID, Stream: c.Stream, Offset: c.Offset, Text: c.Text})
				}
			}
			if md, merr := msg.Metadata(); done && merr == nil && md.NumPending == 0 {
				return nil
			}
		case errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded):
			if done {
				// Nothing arrived for a second after the end: all is out.
				return nil
			}
		default:
			return err
		}
		if !done && time.Since(lastPoll) >= time.Second {
			lastPoll = time.Now()
			now, err := pick(ctx, cl, target, false)
			if err != nil {
				return err
			}
			// After the end, keep reading until a fetch comes back empty:
			// the last chunks may still be on their way.
			done = ended(now)
		}
	}
}

// diffResult is what diff -o json prints.
type diffResult struct {
	Attempt string `json:"attempt"`
	Stat    string `json:"stat"`
	Patch   string `json:"patch"`
}

func printDiff(ctx context.Context, cl *controller.Client, js jetstream.JetStream, t controller.Target, output string, w, errw io.Writer) error {
	a, err := pick(ctx, cl, t, true)
	if err != nil {
		return err
	}
	if a == nil {
		return notFound(fmt.Errorf("task %s/%s has no attempt yet", t.Flow, t.Task))
	}
	r := a.Report
	if r == nil {
		return notFound(fmt.Errorf("attempt %s has not reported yet (state %s); its diff exists once it has", a.ID, a.State))
	}
	res := diffResult{Attempt: a.ID, Stat: r.DiffSummary}
	if res.Stat == "" {
		res.Stat = a.DiffStat
	}
	if r.PatchObject != "" {
		rc, err := objstore.NewArtifacts(js).Get(ctx, r.PatchObject)
		if err == nil {
			b, rerr := io.ReadAll(rc)
			rc.Close()
			if rerr == nil {
				res.Patch = string(b)
			} else {
				err = rerr
			}
		}
		if err != nil {
			fmt.Fprintf(errw, "note: the patch of %s cannot be read from the object store (%s); showing the report's diff stat\n",
				termsafe.Line(a.ID), termsafe.Line(err.Error()))
		}
	} else if res.Stat != "" {
		fmt.Fprintf(errw, "note: attempt %s stored no patch; showing the report's diff stat\n", termsafe.Line(a.ID))
	} else {
		fmt.Fprintf(errw, "attempt %s changed no file\n", termsafe.Line(a.ID))
	}
	if output == "json" {
		return json.NewEncoder(w).Encode(res)
	}
	return writeDiff(w, res)
}

// writeDiff prints a patch as text. It holds the agent's file contents:
// escaped on a terminal, byte for byte to a pipe (`diff | git apply`).
func writeDiff(w io.Writer, res diffResult) error {
	body := bodyText(w)
	if res.Patch != "" {
		_, err := io.WriteString(w, body(res.Patch))
		return err
	}
	_, err := io.WriteString(w, body(res.Stat))
	return err
}
