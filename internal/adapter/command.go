package adapter

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// ErrBinaryNotFound means the runtime's binary is not on this host.
var ErrBinaryNotFound = errors.New("adapter: binary not found")

// baseEnv is what every CLI may see of the worker's environment; secrets
// reach it only through a runtime's env_passthrough.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SHELL"}

// CommandAdapter runs any binary with arguments, the prompt by stdin,
// argument or file, as configured. It is the generic adapter every
// config-defined runtime uses.
type CommandAdapter struct {
	name string
	rt   config.Runtime

	mu   sync.Mutex
	info *Info
}

var (
	_ Adapter       = (*CommandAdapter)(nil)
	_ HealthChecker = (*CommandAdapter)(nil)
	_ OutputReader  = (*CommandAdapter)(nil)
	_ Evaluator     = (*CommandAdapter)(nil)
)

// Command is a CLI's process ready to start under supervision: what
// CommandAdapter.Command builds for one task, and Start starts.
type Command struct {
	Path            string
	Args            []string
	Env             []string
	Stdin           io.Reader
	Timeout         time.Duration
	NoOutputTimeout time.Duration
	Grace           time.Duration
	MaxOutput       int64
	Limits          supervise.Limits
	// OwnRetryTimeout bounds the CLI's own retries of a rate limit, read
	// from its output while it runs (see StopOn); 0 means the default.
	OwnRetryTimeout time.Duration
	// Sandbox is what the process may reach when the worker confines it.
	Sandbox Sandbox
}

// NewCommand returns the generic adapter for a runtime.
func NewCommand(name string, rt config.Runtime) *CommandAdapter {
	return &CommandAdapter{name: name, rt: rt}
}

// Name implements Adapter.
func (a *CommandAdapter) Name() string { return a.name }

// Runtime returns the runtime's configuration the adapter was made with.
func (a *CommandAdapter) Runtime() config.Runtime { return a.rt }

// PassedEnv is the names of the worker's environment variables a runtime's
// CLI sees, when they are set: the base allowlist, then the runtime's
// env_passthrough and env_passthrough_add. The variables its provider
// configuration names come on top, per attempt (KeyVariables).
func PassedEnv(rt config.Runtime) []string {
	return append(slices.Clone(baseEnv), rt.Passthrough()...)
}

// Initialize implements Adapter: binary found, executable, version printed.
// A success is cached; a failure is retried on the next call.
func (a *CommandAdapter) Initialize(ctx context.Context) (*Info, error) {
	a.mu.Lock()
	info := a.info
	a.mu.Unlock()
	if info != nil {
		return info, nil
	}
	return a.Check(ctx)
}

// Check implements HealthChecker: it runs the checks again, whatever is cached.
func (a *CommandAdapter) Check(ctx context.Context) (*Info, error) {
	path, err := ResolveBinary(a.rt.Binary)
	if err == nil {
		var info *Info
		if info, err = a.version(ctx, path); err == nil {
			a.mu.Lock()
			a.info = info
			a.mu.Unlock()
			return info, nil
		}
	}
	a.mu.Lock()
	a.info = nil
	a.mu.Unlock()
	return nil, err
}

func (a *CommandAdapter) version(ctx context.Context, path string) (*Info, error) {
	info := &Info{Adapter: "command", Binary: path}
	if len(a.rt.VersionArgs) == 0 {
		return info, nil
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(vctx, path, a.rt.VersionArgs...)
	cmd.Env = a.env(nil, os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("adapter: %s version check `%s %s`: %w: %s", a.name, path,
			strings.Join(a.rt.VersionArgs, " "), err, bytes.TrimSpace(tail(out, 512)))
	}
	info.Version = firstLine(out)
	if a.rt.MinVersion != "" {
		got := versionIn.FindString(info.Version)
		if got == "" || compareVersions(got, a.rt.MinVersion) < 0 {
			return nil, fmt.Errorf("%w: %s reports %q, need at least %s", ErrVersionTooOld, a.name, info.Version, a.rt.MinVersion)
		}
	}
	return info, nil
}

// ErrVersionTooOld means the binary is older than the runtime's min_version.
var ErrVersionTooOld = errors.New("adapter: version too old")

var versionIn = regexp.MustCompile(`\d+(\.\d+)+`)

// compareVersions compares dotted numbers: 1.10 > 1.9, 2 == 2.0.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return cmp.Compare(x, y)
		}
	}
	return 0
}

// Capabilities implements Adapter.
func (a *CommandAdapter) Capabilities() Capabilities {
	return Capabilities{
		SupportsModel:               a.rt.ModelFlag != "",
		SupportsNonInteractive:      true, // a command runtime is headless by construction
		SupportsPromptFileInclusion: a.rt.Input == "file",
		AvailableModels:             a.rt.Models,
	}
}

// Evaluate implements Evaluator: the capabilities, the model the CLI is
// given (model, else the configured one, else its own choice: empty), and
// a scope that only the check after the run can hold.
func (a *CommandAdapter) Evaluate(model string) Evaluation {
	return Evaluation{Capabilities: a.Capabilities(), Model: cmp.Or(model, a.rt.Model), ScopeEnforcement: ScopeDetected}
}

// ResolveBinary finds a runtime binary: a path as given, else in PATH, else
// beside the running Drover binary (where `make build` puts the demo agent).
func ResolveBinary(bin string) (string, error) {
	if strings.ContainsRune(bin, '/') {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if err := checkExecutable(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	if p, err := exec.LookPath(bin); err == nil {
		return filepath.Abs(p)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), bin)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q is not in PATH nor beside the drover binary", ErrBinaryNotFound, bin)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBinaryNotFound, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not an executable file", ErrBinaryNotFound, p)
	}
	return nil
}

// Command builds the CLI's process for one task: its command line, its
// environment from the allowlist, its input, its limits and what its
// sandbox must let it reach. Start starts it.
func (a *CommandAdapter) Command(in *Input) (*Command, error) {
	info, err := a.Initialize(context.Background())
	if err != nil {
		return nil, err
	}
	args := append([]string(nil), a.rt.Args...)
	// The attempt's model replaces the configured one; either goes with the
	// runtime's model flag, which config validation requires for a
	// configured model.
	model := a.rt.Model
	if in.Model != "" {
		if a.rt.ModelFlag == "" {
			return nil, fmt.Errorf("adapter: runtime %s cannot select a model (no model_flag configured), but model %q was asked for", a.name, in.Model)
		}
		model = in.Model
	}
	if model != "" && a.rt.ModelFlag != "" {
		args = append(args, a.rt.ModelFlag, model)
	}
	args = append(args, in.Args...)
	var stdin *strings.Reader
	prompt := ""
	switch a.rt.Input {
	case "arg":
		args = appendPrompt(args, a.rt.PromptFlag, in.Prompt)
	case "file":
		prompt = filepath.Join(in.TempDir, "prompt.md")
		if err := os.WriteFile(prompt, []byte(in.Prompt), 0o600); err != nil {
			return nil, fmt.Errorf("adapter: write prompt file: %w", err)
		}
		args = appendPrompt(args, a.rt.PromptFlag, prompt)
	default:
		stdin = strings.NewReader(in.Prompt)
	}
	timeout := a.rt.Timeout
	if in.Timeout > 0 {
		timeout = in.Timeout
	}
	env := in.Env
	// home is where the CLI's provider configs are read from; ownHome the
	// HOME made for this attempt, which it may write.
	home, _ := os.UserHomeDir()
	ownHome := ""
	if a.rt.Home == "isolated" {
		if home, err = a.isolatedHome(in.TempDir); err != nil {
			return nil, err
		}
		ownHome = home
		env = append(append([]string(nil), env...), "HOME="+home)
	}
	// The CLI's TMPDIR is a directory of its own: the rest of TempDir
	// (the prompt file, the attempt's log) is not the CLI's to change.
	tmp := filepath.Join(in.TempDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("adapter: TMPDIR: %w", err)
	}
	env = a.env(env, tmp)
	vars := varMap(env)
	prov := a.providerConfig(env, home, expandPaths(a.rt.Sandbox.Write, vars["HOME"], vars))
	env = withKeys(env, prov.keys)
	eps, notes := prov.endpoints(varMap(env))
	box := sandboxNeeds(a.rt.Sandbox, env, ownHome, tmp, prompt, eps)
	box.Notes = append(prov.notes, notes...)
	c := &Command{
		Path: info.Binary, Args: args, Env: env, Sandbox: box,
		Timeout: timeout, NoOutputTimeout: a.rt.NoOutputTimeout, Grace: a.rt.Grace, MaxOutput: a.rt.MaxOutputSize,
		Limits: supervise.Limits(a.rt.Limits), OwnRetryTimeout: a.rt.OwnRetryTimeout,
	}
	if stdin != nil {
		c.Stdin = stdin
	}
	return c, nil
}

// isolatedHome makes a HOME private to the attempt and stages into it the
// files the CLI needs from the worker's HOME (its login, its settings), so
// that isolation does not break login-based auth.
func (a *CommandAdapter) isolatedHome(tmp string) (string, error) {
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("adapter: isolated home: %w", err)
	}
	src, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("adapter: isolated home: the worker has no HOME to stage from: %w", err)
	}
	for _, rel := range a.rt.HomeFiles {
		from, to := filepath.Join(src, rel), filepath.Join(home, rel)
		st, err := os.Stat(from)
		if errors.Is(err, os.ErrNotExist) {
			continue // not every login method leaves every file
		}
		if err == nil {
			err = os.MkdirAll(filepath.Dir(to), 0o700)
		}
		if err == nil {
			if st.IsDir() {
				err = os.CopyFS(to, os.DirFS(from))
			} else {
				err = copyFile(from, to)
			}
		}
		if err != nil {
			return "", fmt.Errorf("adapter: stage %s into the isolated HOME: %w", rel, err)
		}
	}
	return home, nil
}

func copyFile(from, to string) error {
	st, err := os.Stat(from)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, st.Mode().Perm())
}

func appendPrompt(args []string, flag, v string) []string {
	if flag != "" {
		args = append(args, flag)
	}
	return append(args, v)
}

// env builds the CLI's whole environment from the allowlist. Each name
// appears once: a later source replaces an earlier one (the worker's
// variables, then the runtime's fixed env, then Drover's, then TMPDIR).
// A duplicate would be read differently by each CLI — Go and glibc's getenv
// take the first, sh the last — so an override would silently be ignored.
func (a *CommandAdapter) env(extra []string, tmp string) []string {
	var env []string
	index := map[string]int{}
	set := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			env[i] = kv
			return
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	for _, name := range PassedEnv(a.rt) {
		if v, ok := os.LookupEnv(name); ok {
			set(name + "=" + v)
		}
	}
	for _, kv := range a.rt.Env {
		set(kv)
	}
	for _, kv := range extra {
		set(kv)
	}
	set("TMPDIR=" + tmp)
	return env
}

func hasVar(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { n, _, _ := strings.Cut(kv, "="); return n == name })
}

// NewParser implements OutputReader with the runtime's output format.
func (a *CommandAdapter) NewParser() transcript.Parser {
	return transcript.NewParser(a.rt.Output) // config validated it; an unknown one reads as text
}

// OwnRetryTimeout implements OutputReader: the runtime's own_retry_timeout.
func (a *CommandAdapter) OwnRetryTimeout() time.Duration { return a.rt.OwnRetryTimeout }

// Classify implements Adapter: how the process ended (Exit.Err, from
// ClassifyExit), corrected by what its output says.
func (a *CommandAdapter) Classify(exit *Exit, sum *transcript.Summary) *Error {
	return classify(exit.StopCause, exit.Err, sum)
}

// Classify combines the exit classification with the output's. A rate limit
// or an auth failure in the output names the cause even when the process was
// ended by a timeout (the CLI was busy retrying) or exited 0; any other
// failure in the output turns an exit 0 into a failure.
func Classify(res *supervise.Result, sum *transcript.Summary) *Error {
	return classify(stopCause(res), ClassifyExit(res), sum)
}

// classify is Classify of a process that was stopped with cause (nil when
// it was not stopped) and whose exit says exitErr; exitErr is not changed.
func classify(cause error, exitErr *Error, sum *transcript.Summary) *Error {
	var byOutput *StoppedByOutput
	if errors.As(cause, &byOutput) {
		return stoppedError(byOutput)
	}
	if sum == nil || sum.Failure == nil {
		return exitErr
	}
	f := sum.Failure
	out := &Error{
		Class: f.Class, Category: drovertype.CategoryRuntime, Message: f.Message, Recoverable: f.Retryable,
		Status: f.Status, RetryAfter: f.RetryAfter, ResetAt: f.ResetAt,
	}
	switch {
	case f.Class == drovertype.ClassRateLimited || f.Class == drovertype.ClassAuthFailed:
		if f.Class == drovertype.ClassRateLimited {
			out.Recoverable = true
		}
		return out
	case exitErr == nil:
		return out
	}
	exit := *exitErr
	if f.Message != "" && !strings.Contains(exit.Message, f.Message) {
		exit.Message += "; output: " + f.Message
	}
	exit.Status = f.Status
	return &exit
}

// ClassifyExit is the classification every adapter starts from.
func ClassifyExit(res *supervise.Result) *Error {
	switch res.Outcome {
	case supervise.Exited:
		if res.ExitCode == 0 {
			return nil
		}
		msg := fmt.Sprintf("exit code %d", res.ExitCode)
		if t := lastLine(res.Stderr.String()); t != "" {
			msg += ": " + t
		}
		return &Error{Class: drovertype.ClassRuntimeError, Category: drovertype.CategoryRuntime, Message: msg}
	case supervise.TimedOut:
		return &Error{Class: drovertype.ClassTimeout, Category: drovertype.CategoryRuntime, Message: "wall-clock timeout", Recoverable: true}
	case supervise.Hung:
		return &Error{Class: drovertype.ClassTimeout, Category: drovertype.CategoryRuntime, Message: "no output for too long (hang)", Recoverable: true}
	case supervise.Stopped:
		return &Error{Class: drovertype.ClassCrashed, Category: drovertype.CategoryRuntime, Message: fmt.Sprintf("stopped: %v", res.StopCause), Recoverable: true}
	default:
		return &Error{Class: drovertype.ClassCrashed, Category: drovertype.CategoryRuntime, Message: "killed by signal " + res.Signal, Recoverable: true}
	}
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.TrimSpace(s)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
