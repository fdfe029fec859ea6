package worktree

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"
)

// defaultStdoutLimit bounds the stdout kept for ordinary git commands
// (rev-parse, ls-files, log): far above anything legitimate, far below
// anything that would hurt the worker.
const defaultStdoutLimit = 16 << 20

// waitDelay bounds how long we wait for git's children (upload-pack, ssh)
// to release stdout/stderr after git itself has exited or been killed.
const waitDelay = 5 * time.Second

// gitRun describes one git invocation.
type gitRun struct {
	dir         string   // working directory; "" = the cache directory
	env         []string // extra environment (GIT_DIR, GIT_INDEX_FILE, ...)
	args        []string
	stdin       string    // "" = no input, or input
	input       io.Reader // read as stdin when stdin is ""
	stdoutLimit int64     // 0 = defaultStdoutLimit
	allowTrunc  bool      // return truncated stdout instead of ErrOutputTooLarge
}

type gitResult struct {
	stdout    []byte
	truncated bool
}

// baseEnv is rebuilt per command so the process environment is read at run
// time (tests change HOME), and so nothing but PATH, HOME and
// GIT_ALLOW_PROTOCOL leaks into git:
// GIT_DIR, GIT_AUTHOR_*, GIT_INDEX_FILE and friends in Drover's own
// environment would otherwise silently redirect or alter every command.
func (c *Cache) baseEnv() []string {
	env := []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		// Replace refs would show other content under an object's name.
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=false",
		"LC_ALL=C",
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
	return append(env, c.extraEnv...)
}

// DefaultAllowProtocol is GIT_ALLOW_PROTOCOL unless the worker's environment
// sets it: git's built-in transports; "file" covers local paths.
const DefaultAllowProtocol = "https:http:ssh:git:file"

// configArgs are prepended to every command. They neutralise settings that
// could run programs or change results, whichever config file they come
// from: a cache's config is verified before each use (cachecheck.go), but
// an agent's own repository's (agentgit.go) may say anything. No hooks,
// no fsmonitor, no credential helper, pager or editor; the attributes of
// the worktree name filters and merge drivers only config defines.
func (c *Cache) configArgs() []string {
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
		"-c", "user.name=" + c.authorName,
		"-c", "user.email=" + c.authorEmail,
	}
}

// run executes git and returns its stdout. A non-zero exit yields a
// *GitError; if ctx ended, the GitError wraps ctx.Err().
func (c *Cache) run(ctx context.Context, r gitRun) (gitResult, error) {
	limit := r.stdoutLimit
	if limit <= 0 {
		limit = defaultStdoutLimit
	}
	args := append(c.configArgs(), r.args...)
	cmd := exec.CommandContext(ctx, c.gitBin, args...)
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = c.dir
	}
	cmd.Env = append(c.baseEnv(), r.env...)
	if r.stdin != "" {
		cmd.Stdin = strings.NewReader(r.stdin)
	} else if r.input != nil {
		cmd.Stdin = r.input
	}
	stdout := &limitedBuffer{limit: limit}
	stderr := &tailBuffer{limit: maxStderr - len("...")}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = waitDelay

	start := time.Now()
	err := cmd.Run()
	if c.log.Enabled(ctx, slog.LevelDebug) {
		attrs := []slog.Attr{slog.Any("args", r.args), slog.Duration("took", time.Since(start))}
		if err != nil {
			attrs = append(attrs, slog.String("err", err.Error()))
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "git", attrs...)
	}
	if err != nil {
		ge := &GitError{
			Args:     append([]string(nil), r.args...),
			ExitCode: -1,
			Stderr:   strings.TrimSpace(stderr.String()),
			Err:      err,
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			ge.ExitCode = ee.ExitCode()
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			ge.Err = ctxErr
			ge.ExitCode = -1
		}
		return gitResult{stdout: stdout.buf.Bytes(), truncated: stdout.truncated}, ge
	}
	if stdout.truncated && !r.allowTrunc {
		return gitResult{}, &GitError{
			Args:     append([]string(nil), r.args...),
			ExitCode: 0,
			Err:      ErrOutputTooLarge,
		}
	}
	return gitResult{stdout: stdout.buf.Bytes(), truncated: stdout.truncated}, nil
}

// out runs git and returns stdout with surrounding whitespace trimmed.
func (c *Cache) out(ctx context.Context, r gitRun) (string, error) {
	res, err := c.run(ctx, r)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.stdout)), nil
}

// exitCode reports 0 for nil, the exit status of a *GitError, or -1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ge *GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// limitedBuffer keeps the first limit bytes and discards the rest, still
// reporting success so git is never blocked or killed by a full pipe.
type limitedBuffer struct {
	buf       bytes.Buffer
	limit     int64
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - int64(b.buf.Len())
	if room <= 0 {
		if len(p) > 0 {
			b.truncated = true
		}
		return len(p), nil
	}
	if int64(len(p)) > room {
		b.buf.Write(p[:room])
		b.truncated = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the last limit bytes: git prints the fatal line last.
type tailBuffer struct {
	buf       []byte
	limit     int
	truncated bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= b.limit {
		b.buf = append(b.buf[:0], p[len(p)-b.limit:]...)
		b.truncated = true
		return n, nil
	}
	if over := len(b.buf) + len(p) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

func (b *tailBuffer) String() string {
	if b.truncated {
		// Drop a partial first line so the message starts cleanly.
		s := string(b.buf)
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		return "..." + s
	}
	return string(b.buf)
}
