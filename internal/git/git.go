package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Default identity for the commits and merges Drover makes.
const (
	DefaultAuthorName  = "Drover"
	DefaultAuthorEmail = "drover@localhost"
)

// DefaultAllowProtocol is GIT_ALLOW_PROTOCOL unless the worker's environment
// sets it: git's built-in transports; "file" covers local paths.
const DefaultAllowProtocol = "https:http:ssh:git:file"

// defaultStdoutLimit bounds the stdout kept for ordinary git commands
// (rev-parse, ls-files, log): far above anything legitimate, far below
// anything that would hurt the worker.
const defaultStdoutLimit = 16 << 20

// waitDelay bounds how long we wait for git's children (upload-pack, ssh)
// to release stdout/stderr after git itself has exited or been killed.
const waitDelay = 5 * time.Second

// Options configures a Git.
type Options struct {
	// Git is the git binary. Defaults to "git" from PATH.
	Git string
	// Env is extra environment for every command, as KEY=VALUE (e.g.
	// SSH_AUTH_SOCK or GIT_SSH_COMMAND for private remotes). Everything
	// else of the process's but PATH, HOME and GIT_ALLOW_PROTOCOL is
	// withheld from git.
	Env []string
	// The identity of the commits and merges git makes. Default to
	// DefaultAuthorName and DefaultAuthorEmail.
	AuthorName, AuthorEmail string
	// Logger gets one debug record per command ("git", its args and how
	// long it took). Defaults to discarding.
	Logger *slog.Logger
}

// Git runs git commands, hardened (see the package doc). It is safe for
// concurrent use.
type Git struct {
	bin         string
	env         []string
	authorName  string
	authorEmail string
	log         *slog.Logger

	versionOnce sync.Once
	version     string // `git version`'s answer, "" if it failed
}

// New checks opts and finds the git binary.
func New(opts Options) (*Git, error) {
	name := opts.Git
	if name == "" {
		name = "git"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("git: binary: %w", err)
	}
	for _, kv := range opts.Env {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("git: Options.Env entry %q is not KEY=VALUE", kv)
		}
	}
	g := &Git{
		bin: bin, env: append([]string(nil), opts.Env...),
		authorName: opts.AuthorName, authorEmail: opts.AuthorEmail, log: opts.Logger,
	}
	if g.authorName == "" {
		g.authorName = DefaultAuthorName
	}
	if g.authorEmail == "" {
		g.authorEmail = DefaultAuthorEmail
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g, nil
}

// Binary is the git binary every command runs.
func (g *Git) Binary() string { return g.bin }

// Identity is the name and email of the commits git makes for Drover.
func (g *Git) Identity() (name, email string) { return g.authorName, g.authorEmail }

// Cmd is one git command.
type Cmd struct {
	// Dir is the working directory. Required.
	Dir string
	// GitDir and WorkTree, when set, are the repository and the work tree
	// the command uses (GIT_DIR, GIT_WORK_TREE): nothing in Dir, such as
	// a .git an agent rewrote, can make git use another.
	GitDir, WorkTree string
	// Env is extra environment for this command (GIT_INDEX_FILE, ...).
	Env  []string
	Args []string
	// Stdin is the command's input; nil is none.
	Stdin io.Reader
	// Stdout, when set, receives the command's output as it comes, and
	// the Result holds none of it.
	Stdout io.Writer
	// StdoutLimit bounds the output kept; 0 is 16 MiB. Past it the
	// command fails with ErrOutputTooLarge unless AllowTrunc, which keeps
	// what fits and says so (Result.Truncated).
	StdoutLimit int64
	AllowTrunc  bool
	// Confine, when set, is called with the command before it starts,
	// for a sandbox to confine it; done is called once it has run.
	Confine func(cmd *exec.Cmd) (done func(), err error)
}

// In is a command with args run in dir.
func In(dir string, args ...string) Cmd { return Cmd{Dir: dir, Args: args} }

// Result is what a command printed.
type Result struct {
	Stdout    []byte
	Truncated bool
}

// env is the command's whole environment, rebuilt per command so the
// process environment is read at run time (tests change HOME), and so
// nothing but PATH, HOME and GIT_ALLOW_PROTOCOL of it leaks into git:
// GIT_DIR, GIT_AUTHOR_*, GIT_INDEX_FILE and friends in Drover's own
// environment would otherwise silently redirect or alter every command.
func (g *Git) environ(c *Cmd) []string {
	env := []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		// Replace refs would show other content under an object's name.
		"GIT_NO_REPLACE_OBJECTS=1",
		// A repository whose config names a promisor remote would fetch
		// what it lacks from wherever that says.
		"GIT_NO_LAZY_FETCH=1",
		"GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=false",
		"LC_ALL=C",
		// Looking for a repository, git goes no further than Dir itself.
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(filepath.Clean(c.Dir)),
	}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// The transports git may use, whatever a repository URL or a config
	// file asks for: git's own, never a remote helper (ext::, fd::, or any
	// unknown scheme). A worker's operator narrows it by setting the
	// variable, e.g. GIT_ALLOW_PROTOCOL=https:ssh to refuse local paths.
	allow := DefaultAllowProtocol
	if v, ok := os.LookupEnv("GIT_ALLOW_PROTOCOL"); ok {
		allow = v
	}
	env = append(env, "GIT_ALLOW_PROTOCOL="+allow)
	env = append(env, g.env...)
	if c.GitDir != "" {
		env = append(env, "GIT_DIR="+c.GitDir)
	}
	if c.WorkTree != "" {
		env = append(env, "GIT_WORK_TREE="+c.WorkTree)
	}
	return append(env, c.Env...)
}

// configArgs are prepended to every command. They neutralise settings that
// could run programs or change results, whichever config file they come
// from: a cache's config is verified before each use, but an agent's own
// repository's may say anything. No hooks, no fsmonitor, no credential
// helper, pager or editor; the attributes of the worktree name filters and
// merge drivers only config defines.
func (g *Git) configArgs() []string {
	return []string{
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "credential.helper=",
		"-c", "core.pager=cat",
		"-c", "core.editor=false",
		"-c", "sequence.editor=false",
		"-c", "diff.external=",
		"-c", "core.quotePath=false",
		"-c", "commit.gpgsign=false",
		"-c", "tag.gpgsign=false",
		"-c", "gc.auto=0", // no gc racing live worktrees or detaching into the background
		"-c", "maintenance.auto=false",
		"-c", "advice.detachedHead=false",
		// Only a repository named (GIT_DIR, --git-dir) may be bare: one
		// found by looking, as an agent could plant, is refused.
		"-c", "safe.bareRepository=explicit",
		"-c", "user.name=" + g.authorName,
		"-c", "user.email=" + g.authorEmail,
	}
}

// Run executes git and returns its stdout. A non-zero exit yields an
// *Error; if ctx ended, the Error wraps ctx.Err().
func (g *Git) Run(ctx context.Context, c Cmd) (Result, error) {
	if c.Dir == "" {
		return Result{}, errors.New("git: Cmd.Dir is required")
	}
	limit := c.StdoutLimit
	if limit <= 0 {
		limit = defaultStdoutLimit
	}
	cmd := exec.CommandContext(ctx, g.bin, append(g.configArgs(), c.Args...)...)
	cmd.Dir = c.Dir
	cmd.Env = g.environ(&c)
	cmd.Stdin = c.Stdin
	stdout := &limitedBuffer{limit: limit}
	cmd.Stdout = stdout
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	stderr := &tailBuffer{limit: MaxStderr - len("...")}
	cmd.Stderr = stderr
	cmd.WaitDelay = waitDelay
	if c.Confine != nil {
		done, err := c.Confine(cmd)
		if err != nil {
			return Result{}, err
		}
		defer done()
	}

	start := time.Now()
	err := cmd.Run()
	if g.log.Enabled(ctx, slog.LevelDebug) {
		attrs := []slog.Attr{slog.Any("args", c.Args), slog.Duration("took", time.Since(start))}
		if err != nil {
			attrs = append(attrs, slog.String("err", err.Error()))
		}
		g.log.LogAttrs(ctx, slog.LevelDebug, "git", attrs...)
	}
	res := Result{Stdout: stdout.buf.Bytes(), Truncated: stdout.truncated}
	if err != nil {
		return res, newError(ctx, c.Args, err, stderr.String())
	}
	if res.Truncated && !c.AllowTrunc {
		return Result{}, &Error{Args: append([]string(nil), c.Args...), ExitCode: 0, Err: ErrOutputTooLarge}
	}
	return res, nil
}

// Output runs git and returns stdout with surrounding whitespace trimmed.
func (g *Git) Output(ctx context.Context, c Cmd) (string, error) {
	res, err := g.Run(ctx, c)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// AtLeast reports whether the git binary is version major.minor or later,
// asking it once.
func (g *Git) AtLeast(ctx context.Context, major, minor int) bool {
	g.versionOnce.Do(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// `git version` reads no repository: any directory that exists will do.
		g.version, _ = g.Output(cctx, Cmd{Dir: "/", Args: []string{"version"}})
	})
	return gitAtLeast(g.version, major, minor)
}
