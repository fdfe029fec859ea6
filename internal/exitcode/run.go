package exitcode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/termsafe"
)

// Run executes root with args and returns its exit code: OK, Usage when
// cobra refused the command line before the command ran, the code an
// error carries (With), Interrupted when ctx was cancelled, and otherwise
// what classify makes of the error (Failed when it knows it not). The
// error goes to stderr, made safe for a terminal: errors quote input (a
// flow file, a controller's reply, a lock's holder).
func Run(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer, classify func(error) int) int {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	strict(root, args)
	// Cobra checks the command, its flags and its arguments before this
	// hook: an error before it is a usage error.
	ran := false
	root.PersistentPreRun = func(*cobra.Command, []string) { ran = true }
	err := root.ExecuteContext(ctx)
	code := OK
	switch {
	case err == nil:
		return OK
	case !ran:
		code = Usage
	default:
		var ok bool
		if code, ok = Of(err); ok {
			break
		}
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			code = Interrupted
		} else {
			code = classify(err)
		}
	}
	if code == Interrupted {
		fmt.Fprintln(stderr, "interrupted")
	} else {
		fmt.Fprintln(stderr, "error:", termsafe.Text(err.Error()))
	}
	return code
}

// strict makes a command line cobra would answer with help and exit 0
// a usage error. A group below the root (a command with subcommands and no
// action of its own, cobra's completion among them) given an argument
// names a subcommand it does not have; alone, it shows its help, as
// before. `help TOPIC` of an unknown topic is refused alike. (Cobra itself
// refuses an unknown command of the root.)
func strict(root *cobra.Command, args []string) {
	root.InitDefaultCompletionCmd(args...)
	root.InitDefaultHelpCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		switch {
		case c.Name() == "help" && c.Parent() == root && c.Run != nil:
			show := c.Run
			c.RunE = func(c *cobra.Command, topic []string) error {
				if found, rest, err := root.Find(topic); err != nil || found == root && len(topic) > 0 || len(rest) > 0 {
					return With(Usage, fmt.Errorf("unknown help topic %q", strings.Join(topic, " ")))
				}
				show(c, topic)
				return nil
			}
		case c != root && c.HasSubCommands() && !c.Runnable():
			c.Args = cobra.ArbitraryArgs
			c.RunE = group

		}
	}
	walk(root)
}

// group is the action of a group: its help, or an unknown subcommand.
func group(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return c.Help()
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default for the root
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(s, " or "))
	}
	return With(Usage, err)
}
