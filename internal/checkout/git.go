package checkout

import (
	"context"
	"strings"

	"github.com/drover-dev/drover/internal/git"
)

// cmd is a git command run on the checkout. GIT_DIR and GIT_WORK_TREE are
// explicit so that an agent deleting or rewriting the .git file cannot make
// git discover some other repository.
func (w *Checkout) cmd(args ...string) git.Cmd {
	return git.Cmd{Dir: w.Path, GitDir: w.gitDir, WorkTree: w.Path, Args: args}
}

// withStdin is c with in as its input.
func withStdin(c git.Cmd, in string) git.Cmd {
	c.Stdin = strings.NewReader(in)
	return c
}

// run runs a git command on the checkout.
func (w *Checkout) run(ctx context.Context, c git.Cmd) (git.Result, error) {
	return w.cs.git.Run(ctx, c)
}

func (w *Checkout) out(ctx context.Context, args ...string) (string, error) {
	return w.cs.git.Output(ctx, w.cmd(args...))
}
