// Command controller is Drover's controller daemon and operator CLI.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/dirlock"
	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/readlimit"
	"github.com/drover-dev/drover/internal/sandbox"
)

func main() {
	// The sandbox's re-exec step for `controller dev`'s local workers,
	// where package stub could not run it before main.
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code (docs/cli.md).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return exitcode.Run(ctx, newRoot(), args, stdin, stdout, stderr, exitCode)
}

// exitCode maps the errors of Drover's packages to the exit code table
// of internal/exitcode: the one place the controller CLI decides its codes.
func exitCode(err error) int {
	var apiErr *controller.APIError
	var connErr *natsconn.ConnectError
	switch {
	case errors.Is(err, config.ErrInvalid), errors.Is(err, flow.ErrInvalid),
		errors.Is(err, readlimit.ErrTooLarge), errors.Is(err, readlimit.ErrNotRegular):
		return exitcode.Usage
	case errors.Is(err, dirlock.ErrHeld):
		return exitcode.Busy
	case errors.As(err, &apiErr):
		switch apiErr.Code {
		case controller.CodeBadRequest:
			return exitcode.Usage
		case controller.CodeNotFound:
			return exitcode.NotFound
		case controller.CodeNoWorker:
			return exitcode.NoWorker
		case controller.CodeUnavailable:
			return exitcode.Unreachable // no controller led: trying later may work
		}
	case errors.Is(err, controller.ErrNoController), errors.Is(err, config.ErrNoNATSURL),
		// A NATS no controller ever set up: its streams and buckets are missing.
		errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return exitcode.Unreachable
	case errors.As(err, &connErr) && connErr.Unreachable:
		return exitcode.Unreachable
	}
	return exitcode.Failed
}

// usageError marks bad flags, arguments or input (exit 2).
func usageError(err error) error { return exitcode.With(exitcode.Usage, err) }

// notFound marks a flow, task or attempt that does not exist (exit 3).
func notFound(err error) error { return exitcode.With(exitcode.NotFound, err) }

// failed marks an operation that ran and failed (exit 1).
func failed(err error) error { return exitcode.With(exitcode.Failed, err) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "controller",
		Short: "Drover controller: runs flows of coding-agent tasks across workers",
		Long: `The Drover controller accepts flows (a graph of tasks against a git repo), queues their
attempts on NATS JetStream for workers, and folds the workers' events into its state.

Configuration comes from flags, then DROVER_* environment variables, then the
--config YAML file, then defaults (see docs/config.md).`,
		Example: `  controller dev --workers 2                 # controller + embedded NATS + 2 local workers
  controller submit examples/hello.yaml --watch
  controller status
  controller status hello-x1y2z3 -o json`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (YAML); also $DROVER_CONFIG")
	pf.String("data-dir", "", "data directory (default ~/.drover)")
	pf.String("nats-url", "", "NATS server URL (default: the embedded server of the controller on this data dir)")
	pf.String("log-level", "", "log level: debug, info, warn, error")
	pf.String("log-format", "", "log format: text or json")
	root.AddCommand(newServe(), newDev(), newSubmit(),
		withCompletion(completeFlows, newStatus()), withCompletion(completeFlows, newEvents()), newRebuild(),
		withCompletion(completeFlows, newWatch()),
		withCompletion(completeTasks|completeAttempts, newLogs()), withCompletion(completeTasks|completeAttempts, newDiff()),
		withCompletion(completeTasks|completeAttempts, newReport()),
		newCancel(), newRetry(), newBudget(), newPause(), newResume(), newPublish(), newIterate(), newDeadLetters(),
		newWorkers(), newControllers(), newRuntimeCmd(), newConsoleCmd())
	if resolve, _, err := root.Find([]string{"runtime", "resolve"}); err == nil {
		// --flow takes a flow id or a flow file.
		complete := completeTarget(completeFlows)
		_ = resolve.RegisterFlagCompletionFunc("flow", func(cmd *cobra.Command, args []string, s string) ([]cobra.Completion, cobra.ShellCompDirective) {
			ids, _ := complete(cmd, nil, s)
			return ids, cobra.ShellCompDirectiveDefault
		})
	}
	return root
}

// connect loads the configuration and connects to the controller's NATS.
func connect(cmd *cobra.Command) (*nats.Conn, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return controller.Connect(cfg)
}

// loadConfig reads the configuration for cmd with its flags bound.
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
