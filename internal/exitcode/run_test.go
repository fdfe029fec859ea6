package exitcode

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var errKnown = errors.New("known")

func runWith(ctx context.Context, args []string, runE func(context.Context) error) (int, string) {
	root := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true}
	sub := &cobra.Command{Use: "do", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error { return runE(c.Context()) }}
	sub.Flags().Int("n", 0, "")
	grp := &cobra.Command{Use: "grp"}
	grp.AddCommand(&cobra.Command{Use: "list", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error { return runE(c.Context()) }})
	root.AddCommand(sub, grp)
	var out, errOut bytes.Buffer
	code := Run(ctx, root, args, strings.NewReader(""), &out, &errOut, func(err error) int {
		if errors.Is(err, errKnown) {
			return NotFound
		}
		return Failed
	})
	return code, errOut.String()
}

func TestRun(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		args   []string
		err    error
		code   int
		stderr string
	}{
		{"ok", context.Background(), []string{"do"}, nil, OK, ""},
		{"unknown flag", context.Background(), []string{"do", "--m"}, nil, Usage, "error: unknown flag: --m\n"},
		{"extra argument", context.Background(), []string{"do", "x"}, nil, Usage, "error: unknown command \"x\" for \"x do\"\n"},
		// Cobra shows a group's help and exits 0 when it meets an argument
		// it has no subcommand for; so for `help` of an unknown topic.
		{"a group's subcommand", context.Background(), []string{"grp", "list"}, nil, OK, ""},
		{"a group's unknown subcommand", context.Background(), []string{"grp", "lsit"}, nil, Usage, "error: unknown command \"lsit\" for \"x grp\" (did you mean list?)\n"},
		{"an unknown shell", context.Background(), []string{"completion", "tcsh"}, nil, Usage, "error: unknown command \"tcsh\" for \"x completion\" (did you mean bash or fish or zsh?)\n"},
		{"an unknown help topic", context.Background(), []string{"help", "grp", "nope"}, nil, Usage, "error: unknown help topic \"grp nope\"\n"},
		{"an unknown command", context.Background(), []string{"nope"}, nil, Usage, "error: unknown command \"nope\" for \"x\"\n"},
		{"a code of its own", context.Background(), []string{"do"}, With(Busy, errKnown), Busy, "error: known\n"},
		{"classified", context.Background(), []string{"do"}, errKnown, NotFound, "error: known\n"},
		{"anything else", context.Background(), []string{"do"}, errors.New("boom"), Failed, "error: boom\n"},
		{"interrupted", cancelled, []string{"do"}, context.Canceled, Interrupted, "interrupted\n"},
		// Cancelled without a signal's context: a failure like any other.
		{"cancelled inside", context.Background(), []string{"do"}, context.Canceled, Failed, "error: context canceled\n"},
		// An error quoting input cannot drive the terminal.
		{"escape sequences", context.Background(), []string{"do"}, errors.New("bad \x1b]0;owned\x07 name"), Failed, "error: bad \\x1b]0;owned\\a name\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runWith(tc.ctx, tc.args, func(context.Context) error { return tc.err })
			if code != tc.code || stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}
