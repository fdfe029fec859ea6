package exitcode

import (
	"context"
	"errors"
	"fmt"
	"io"

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
