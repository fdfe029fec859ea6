package gittest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Recorder is a slog.Handler keeping the arguments of every git command
// a git.Git runs (its debug "git" records), to count them.
type Recorder struct {
	mu   sync.Mutex
	cmds [][]string
}

func (g *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (g *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *Recorder) WithGroup(string) slog.Handler            { return g }

func (g *Recorder) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "git" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if args, ok := a.Value.Any().([]string); ok && a.Key == "args" {
			g.mu.Lock()
			g.cmds = append(g.cmds, slices.Clone(args))
			g.mu.Unlock()
		}
		return true
	})
	return nil
}

// Verbs returns the git subcommand of each command recorded so far
// ("fetch", "worktree prune", ...) and forgets them.
func (g *Recorder) Verbs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var verbs []string
	for _, args := range g.cmds {
		verbs = append(verbs, gitVerb(args))
	}
	g.cmds = nil
	return verbs
}

// gitVerb skips the global options before the subcommand; for worktree,
// the subcommand's own subcommand is kept too.
func gitVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c":
			i++
		case strings.HasPrefix(a, "--git-dir="):
		case a == "worktree" && i+1 < len(args):
			return a + " " + args[i+1]
		default:
			return a
		}
	}
	return ""
}

// WantVerbs fails the test unless the commands rec recorded since it was
// last asked are want (see Verbs), and forgets them.
func WantVerbs(t testing.TB, rec *Recorder, what string, want ...string) {
	t.Helper()
	if got := rec.Verbs(); !slices.Equal(got, want) {
		t.Errorf("%s ran git %q, want %q", what, got, want)
	}
}

// Logger is a logger writing to t's output at debug level, where a
// git.Git says each command it runs.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
