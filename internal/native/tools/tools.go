package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/supervise"
)

// Config is one attempt's tool set.
type Config struct {
	// Worktree is the directory the model works in; it must exist.
	Worktree string
	// Scope limits which paths write_file and edit_file may change; nil
	// allows every path of the worktree.
	Scope *flow.Scope
	// Env is the complete environment of shell commands (nothing of the
	// worker's is added); TMPDIR should point into the attempt's own
	// temporary directory.
	Env []string
	// Shell runs the bash tool's commands: an absolute path. Defaults to
	// bash found in PATH, else /bin/sh.
	Shell string
	// Sandbox, if set, confines every shell command before it starts.
	Sandbox Sandbox
	// Limits bound what one call may read, print or take.
	Limits Limits
	// Now is the clock that times tool calls. Defaults to time.Now.
	Now func() time.Time
}

// Limits bound one tool call. Zero fields take the defaults named.
type Limits struct {
	// ReadLines is read_file's default and largest line count. Defaults to 2000.
	ReadLines int
	// LineChars cuts longer lines in read_file and grep output. Defaults to 2000.
	LineChars int
	// ReadBytes bounds read_file's output. Defaults to 256 KiB.
	ReadBytes int
	// WriteBytes bounds the file write_file and edit_file produce. Defaults to 16 MiB.
	WriteBytes int
	// Entries bounds list_dir and glob results. Defaults to 1000.
	Entries int
	// Matches bounds grep's matches. Defaults to 200.
	Matches int
	// SearchFiles and SearchBytes bound what one glob or grep walks and
	// reads. Default to 50,000 files and 256 MiB.
	SearchFiles int
	SearchBytes int64
	// CommandTimeout is a command's timeout when the model asks for none;
	// CommandMaxTimeout the longest it may ask for. Default to 2m and 10m.
	CommandTimeout, CommandMaxTimeout time.Duration
	// CommandOutput is the bytes of a command's output the model sees:
	// the first and the last half of it. Defaults to 64 KiB.
	CommandOutput int
	// Grace is the time between SIGTERM and SIGKILL when a command is
	// stopped. Defaults to 2s.
	Grace time.Duration
	// Process are the resource limits of every command.
	Process supervise.Limits
}

// WithDefaults returns l with zero fields defaulted.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadLines, 2000)
	def(&l.LineChars, 2000)
	def(&l.ReadBytes, 256<<10)
	def(&l.WriteBytes, 16<<20)
	def(&l.Entries, 1000)
	def(&l.Matches, 200)
	def(&l.SearchFiles, 50_000)
	def(&l.CommandOutput, 64<<10)
	if l.SearchBytes <= 0 {
		l.SearchBytes = 256 << 20
	}
	if l.CommandTimeout <= 0 {
		l.CommandTimeout = 2 * time.Minute
	}
	if l.CommandMaxTimeout <= 0 {
		l.CommandMaxTimeout = 10 * time.Minute
	}
	if l.CommandTimeout > l.CommandMaxTimeout {
		l.CommandTimeout = l.CommandMaxTimeout
	}
	if l.Grace <= 0 {
		l.Grace = 2 * time.Second
	}
	return l
}

// Sandbox confines a command before it starts. It is the single seam where
// the attempt's sandbox (Landlock) applies to what the model runs: Wrap may
// rewrite the spec's Path, Args and Env (for instance to start the command
// through a helper that restricts itself and then execs it); it must keep
// Dir, the timeouts and the capture, which supervision relies on.
type Sandbox interface {
	Wrap(spec *supervise.Spec) error
}

// Set is one attempt's tools. Calls are meant to run one at a time, as the
// loop runs them; Close releases the worktree handle.
type Set struct {
	cfg   Config
	lim   Limits
	dir   string // the worktree, absolute and clean, as configured
	real  string // the same with its symlinks resolved
	root  *os.Root
	scope *flow.Scope
	shell string
	now   func() time.Time
}

// New opens the worktree and prepares the tools.
func New(cfg Config) (*Set, error) {
	dir, err := filepath.Abs(cfg.Worktree)
	if err != nil {
		return nil, fmt.Errorf("tools: worktree: %w", err)
	}
	dir = filepath.Clean(dir)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: worktree: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: worktree: %w", err)
	}
	s := &Set{cfg: cfg, lim: cfg.Limits.WithDefaults(), dir: dir, real: real, root: root, scope: cfg.Scope, shell: cfg.Shell, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if s.shell == "" {
		s.shell = Shell()
	}
	return s, nil
}

// Shell is the shell the bash tool runs commands with when Config names
// none: bash if there is one, else /bin/sh.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return "/bin/sh"
}

// Close releases the worktree handle.
func (s *Set) Close() error { return s.root.Close() }

// Dir is the worktree as the tools see it.
func (s *Set) Dir() string { return s.dir }

// Outcome is what one call produced.
type Outcome struct {
	// Content is what the model reads: the result, or the error.
	Content string
	IsError bool
	// Refusal is set when a path was refused; the call did nothing.
	Refusal *Refusal
	// Changed lists the paths (relative to the worktree) a call wrote.
	Changed []string
	// Command is set for the bash tool: how the command ended.
	Command *CommandOutcome
}

// CommandOutcome summarises one shell command.
type CommandOutcome struct {
	ExitCode int    `json:"exit_code"`
	Outcome  string `json:"outcome"` // supervise's: exited, timed_out, stopped, signaled
	Duration time.Duration
}

// ErrUnknownTool is the content of a call to a tool that does not exist.
const unknownTool = "unknown tool %q; the tools are: %s"

type handler struct {
	def func(*Set) model.ToolDef
	run func(s *Set, ctx context.Context, input json.RawMessage) Outcome
}

// registry lists the tools by name. Names and argument names follow what
// coding models are trained on (Claude Code, Codex, OpenCode).
var registry = map[string]handler{
	"read_file":  {defReadFile, (*Set).readFile},
	"write_file": {defWriteFile, (*Set).writeFile},
	"edit_file":  {defEditFile, (*Set).editFile},
	"list_dir":   {defListDir, (*Set).listDir},
	"glob":       {defGlob, (*Set).glob},
	"grep":       {defGrep, (*Set).grep},
	"bash":       {defBash, (*Set).bash},
}

// Names are the tools' names, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Defs are the definitions offered to the model, in a fixed order.
func (s *Set) Defs() []model.ToolDef {
	var out []model.ToolDef
	for _, n := range []string{"read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "bash"} {
		out = append(out, registry[n].def(s))
	}
	return out
}

// Call runs one tool. It never panics on the model's input and returns a
// readable error for anything it refuses; ctx cancellation stops a running
// command at once.
func (s *Set) Call(ctx context.Context, name string, input json.RawMessage) Outcome {
	h, ok := registry[name]
	if !ok {
		return failf(unknownTool, name, joinNames())
	}
	return h.run(s, ctx, input)
}

func joinNames() string {
	out := ""
	for i, n := range Names() {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

func failf(format string, args ...any) Outcome {
	return Outcome{Content: "error: " + fmt.Sprintf(format, args...), IsError: true}
}

// refuse builds the outcome of a refused path.
func (s *Set) refuse(tool, p, reason string) Outcome {
	shown := p
	if len(shown) > 512 {
		shown = shown[:512] + "…"
	}
	r := &Refusal{Tool: tool, Path: shown, Reason: reason}
	msg := fmt.Sprintf("refused: %s: %s. Paths must be inside the worktree %s (relative to it, or absolute)", shown, reason, s.dir)
	switch reason {
	case ReasonNotAllowed, ReasonDenied:
		msg += "; this task may change only: " + s.scopeText()
	}
	return Outcome{Content: msg + ".", IsError: true, Refusal: r}
}

func (s *Set) scopeText() string {
	if s.scope == nil {
		return "any path"
	}
	t := ""
	if len(s.scope.Allow) > 0 {
		b, _ := json.Marshal(s.scope.Allow)
		t = "paths matching " + string(b)
	} else {
		t = "any path"
	}
	if len(s.scope.Deny) > 0 {
		b, _ := json.Marshal(s.scope.Deny)
		t += " except those matching " + string(b)
	}
	return t
}

// resolveRead turns the model's path into a canonical path it may read.
func (s *Set) resolveRead(tool, p string) (string, *Outcome) {
	rel, why := s.lexical(p)
	if why == "" {
		rel, why = s.canonical(rel)
	}
	if why != "" {
		o := s.refuse(tool, p, why)
		return "", &o
	}
	return rel, nil
}

// resolveWrite is resolveRead plus the scope, which must allow both the
// path the model named and the file it leads to.
func (s *Set) resolveWrite(tool, p string) (string, *Outcome) {
	rel, why := s.lexical(p)
	if why == "" {
		why = allowsChange(s.scope, rel)
	}
	var canon string
	if why == "" {
		canon, why = s.canonical(rel)
	}
	if why == "" && canon != rel {
		why = allowsChange(s.scope, canon)
	}
	if why == "" && (canon == "." || canon == "") {
		why = "the worktree itself is a directory, not a file"
	}
	if why != "" {
		o := s.refuse(tool, p, why)
		return "", &o
	}
	return canon, nil
}
