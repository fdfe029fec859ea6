// Command controller is Drover's controller daemon and operator CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/sandbox"
)

// exitError carries a process exit code: 2 for bad input, 1 for a failed flow.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	// The sandbox's re-exec step for `controller dev`'s local workers,
	// where package stub could not run it before main.
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		if errors.Is(err, config.ErrInvalid) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

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
		newCancel(), newRetry(), newPause(), newResume(), newDeadLetters(),
		newWorkers(), newRuntimeCmd())
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

// loadConfig reads the configuration for cmd with its flags bound.
// connect loads the configuration and connects to the controller's NATS.
func connect(cmd *cobra.Command) (*nats.Conn, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return controller.Connect(cfg)
}

func loadConfig(cmd *cobra.Command) (*config.Config, error) {
	file, _ := cmd.Flags().GetString("config")
	return config.Load(config.LoadOptions{File: file, Flags: cmd.Flags(), Bind: config.FlagBindings})
}
