package adaptertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exectest"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// Case tells RunConformance how to make the adapter under test
// and what its fake CLI does.
type Case struct {
	// Name names the case's subtest; empty runs the checks directly under t.
	Name string
	// New returns the adapter configured to run a fake CLI for the runtime.
	New func(t *testing.T) adapter.Adapter
	// NewMissing returns the same adapter with its binary replaced by one
	// that does not exist. Optional: for a *adapter.CommandAdapter the suite derives
	// it; otherwise, when nil, that check is skipped.
	NewMissing func(t *testing.T) adapter.Adapter
	// Prompt makes the CLI succeed and write hello.txt in its working
	// directory. For the demo-agent personas:
	// "create hello.txt containing hi\n@case success".
	Prompt string
	// FailPrompt makes the CLI fail, e.g. with a rate limit (429):
	// "create hello.txt containing hi\n@case fail-429". Empty skips the check.
	FailPrompt string
	// WantClassOnFail is the class Classify must give the FailPrompt run,
	// e.g. drovertype.ClassRateLimited.
	WantClassOnFail drovertype.ErrorClass
	// WantStatusOnFail is the HTTP status the failure must report (429 for
	// a rate limit); 0 does not check it.
	WantStatusOnFail int
	// Env is extra environment the fake CLI needs to run (where its
	// recordings are, IS_SANDBOX=1…), added to the command's environment
	// when the suite starts it. It replaces a variable of the same name.
	Env []string
	// RunTimeout bounds each real run of the CLI; 0 means 60s.
	RunTimeout time.Duration
	// InProcess are the prompts of the checks only an in-process runtime
	// (adapter.InProcess) has; required for one (inprocess.go).
	InProcess InProcessPrompts
}

// conformanceDroverEnv is what the suite passes as Drover's own variables.
var conformanceDroverEnv = []string{"DROVER_TASK_ID=conformance-task", "DROVER_ATTEMPT_ID=conformance-attempt-1"}

// Canaries set in the test process's environment: neither may reach a CLI.
const (
	canaryName       = "DROVER_CONFORMANCE_CANARY_SECRET"
	canaryValue      = "canary-9f3c2b7e-must-not-leak"
	droverCanaryName = "DROVER_WORKER_CANARY" // a DROVER_* of the worker, not of the attempt
)

// RunConformance checks, each in a subtest, what the adapter.Adapter contract
// promises (for an adapter.InProcess, see runInProcess): a name; Initialize (an absolute executable, idempotent, agreeing
// with a HealthChecker's Check, ErrBinaryNotFound for a missing binary);
// capabilities; the command (absolute path, Drover's variables, a private
// TMPDIR, nothing else of the worker's environment); a real run of the CLI
// that succeeds, writes hello.txt and is classified a success; a failing
// run classified as the case says; a timed-out run classified
// RUNTIME_TIMEOUT; and safety for concurrent use.
//
// It calls t.Setenv, so neither t nor its parents may be parallel tests.
func RunConformance(t *testing.T, c Case) {
	t.Helper()
	if c.New == nil || c.Prompt == "" {
		t.Fatalf("conformance case %q: New and Prompt are required", c.Name)
	}
	if c.FailPrompt != "" && c.WantClassOnFail == "" {
		t.Fatalf("conformance case %q: FailPrompt needs WantClassOnFail", c.Name)
	}
	run := runConformance
	if _, ok := c.New(t).(adapter.InProcess); ok {
		run = runInProcess
	}
	if c.Name == "" {
		run(t, c)
		return
	}
	t.Run(c.Name, func(t *testing.T) { run(t, c) })
}

func runConformance(t *testing.T, c Case) {
	t.Run("Name", func(t *testing.T) {
		a := c.New(t)
		if a.Name() == "" {
			t.Error("Name() is empty")
		}
	})
	t.Run("Initialize", func(t *testing.T) { conformInitialize(t, c) })
	t.Run("MissingBinary", func(t *testing.T) { conformMissing(t, c) })
	t.Run("HealthCheckNoticesRemoval", func(t *testing.T) { conformRemoval(t, c) })
	t.Run("Capabilities", func(t *testing.T) {
		caps := c.New(t).Capabilities()
		if !caps.SupportsNonInteractive {
			t.Error("SupportsNonInteractive is false: Drover runs every CLI headless")
		}
		if len(caps.AvailableModels) > 0 && !caps.SupportsModel {
			t.Errorf("AvailableModels %v but SupportsModel is false", caps.AvailableModels)
		}
	})
	t.Run("Command", func(t *testing.T) { conformCommand(t, c) })
	t.Run("Concurrent", func(t *testing.T) { conformConcurrent(t, c) })
	t.Run("RunSucceeds", func(t *testing.T) {
		a := c.New(t)
		r := conformRun(t, c, a, c.Prompt)
		if r.res.Outcome != supervise.Exited || r.res.ExitCode != 0 {
			t.Errorf("the CLI ended %s with exit code %d, want exit 0%s", r.res.Outcome, r.res.ExitCode, r.dump())
		}
		if b, err := os.ReadFile(filepath.Join(r.dir, "hello.txt")); err != nil || len(b) == 0 {
			t.Errorf("hello.txt not written (%v): the prompt did not reach the CLI, or it did not act%s", err, r.dump())
		}
		if e := a.Classify(r.res, r.sum); e != nil {
			t.Errorf("Classify of a successful run = %v, want nil%s", e, r.dump())
		}
	})
	t.Run("RunFails", func(t *testing.T) {
		if c.FailPrompt == "" {
			t.Skip("the case has no FailPrompt")
		}
		a := c.New(t)
		r := conformRun(t, c, a, c.FailPrompt)
		e := a.Classify(r.res, r.sum)
		switch {
		case e == nil:
			t.Fatalf("Classify of a failed run = nil, want %s%s", c.WantClassOnFail, r.dump())
		case e.Class != c.WantClassOnFail:
			t.Errorf("Classify = %v, want class %s%s", e, c.WantClassOnFail, r.dump())
		case c.WantStatusOnFail != 0 && e.Status != c.WantStatusOnFail:
			t.Errorf("Classify = %v with Status %d, want %d%s", e, e.Status, c.WantStatusOnFail, r.dump())
		}
		if e.Category == "" || e.Message == "" {
			t.Errorf("Classify = %+v: Category and Message must be set", e)
		}
		if e.Class == drovertype.ClassRateLimited && !e.Recoverable {
			t.Errorf("a rate limit must be Recoverable: %+v", e)
		}
	})
	t.Run("ClassifyTimeout", func(t *testing.T) { conformTimeout(t, c) })
}

func conformInitialize(t *testing.T, c Case) {
	a := c.New(t)
	ctx := t.Context()
	info, err := a.Initialize(ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if info == nil {
		t.Fatal("Initialize returned nil Info and nil error")
	}
	if info.Adapter == "" {
		t.Errorf("Info.Adapter is empty: %+v", info)
	}
	if !filepath.IsAbs(info.Binary) {
		t.Errorf("Info.Binary %q is not absolute", info.Binary)
	}
	if st, err := os.Stat(info.Binary); err != nil {
		t.Errorf("Info.Binary: %v", err)
	} else if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		t.Errorf("Info.Binary %s is not an executable file (%s)", info.Binary, st.Mode())
	}
	again, err := a.Initialize(ctx)
	if err != nil {
		t.Fatalf("second Initialize: %v", err)
	}
	if *again != *info {
		t.Errorf("Initialize is not idempotent: %+v, then %+v", info, again)
	}
	if hc, ok := a.(adapter.HealthChecker); ok {
		checked, err := hc.Check(ctx)
		if err != nil {
			t.Fatalf("Initialize succeeded but Check fails: %v", err)
		}
		if *checked != *info {
			t.Errorf("Check disagrees with Initialize: %+v, Initialize %+v", checked, info)
		}
		if after, err := a.Initialize(ctx); err != nil || *after != *info {
			t.Errorf("Initialize after Check: %+v, %v; want %+v", after, err, info)
		}
	}
	t.Logf("%s: %s, version %q", a.Name(), info.Binary, info.Version)
}

// missingAdapter is the case's adapter with its binary replaced by one that
// does not exist, or nil with the reason why the case cannot express it.
func missingAdapter(t *testing.T, c Case) (adapter.Adapter, string) {
	if c.NewMissing != nil {
		return c.NewMissing(t), ""
	}
	if ca, ok := c.New(t).(*adapter.CommandAdapter); ok {
		rt := ca.Runtime()
		rt.Binary = "/nonexistent/" + filepath.Base(cmp.Or(rt.Binary, "agent"))
		return adapter.NewCommand(ca.Name(), rt), ""
	}
	return nil, "the case has no NewMissing and its adapter is not a *CommandAdapter"
}

func conformMissing(t *testing.T, c Case) {
	a, why := missingAdapter(t, c)
	if a == nil {
		t.Skip(why)
	}
	ctx := t.Context()
	if info, err := a.Initialize(ctx); !errors.Is(err, adapter.ErrBinaryNotFound) {
		t.Errorf("Initialize with a missing binary = %+v, %v; want ErrBinaryNotFound", info, err)
	}
	if _, err := a.Initialize(ctx); !errors.Is(err, adapter.ErrBinaryNotFound) {
		t.Errorf("second Initialize with a missing binary: %v; want ErrBinaryNotFound (failures are not cached as success)", err)
	}
	if hc, ok := a.(adapter.HealthChecker); ok {
		if _, err := hc.Check(ctx); !errors.Is(err, adapter.ErrBinaryNotFound) {
			t.Errorf("Check with a missing binary: %v; want ErrBinaryNotFound", err)
		}
	}
	cmd, err := a.Command(&adapter.Input{Prompt: "p", Worktree: t.TempDir(), TempDir: t.TempDir()})
	if err == nil {
		t.Errorf("Command with a missing binary = %+v, want an error", cmd)
	}
}

// conformRemoval: a HealthChecker notices a binary removed after a
// successful Initialize, and Initialize does not keep vouching for it.
// Only a *adapter.CommandAdapter can be pointed at a copy of its binary.
func conformRemoval(t *testing.T, c Case) {
	a := c.New(t)
	ca, ok := a.(*adapter.CommandAdapter)
	if !ok {
		t.Skip("only a *CommandAdapter can be pointed at a removable copy of its binary")
	}
	info, err := a.Initialize(t.Context())
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	// Same base name: a fake CLI may pick its persona from it.
	cp := filepath.Join(t.TempDir(), filepath.Base(info.Binary))
	if err := copyExecutable(info.Binary, cp); err != nil {
		t.Fatal(err)
	}
	rt := ca.Runtime()
	rt.Binary = cp
	b := adapter.NewCommand(ca.Name(), rt)
	if _, err := b.Initialize(t.Context()); err != nil {
		t.Fatalf("Initialize of a copy of the binary: %v", err)
	}
	if err := os.Remove(cp); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(t.Context()); !errors.Is(err, adapter.ErrBinaryNotFound) {
		t.Errorf("Check after the binary was removed: %v; want ErrBinaryNotFound", err)
	}
	if _, err := b.Initialize(t.Context()); !errors.Is(err, adapter.ErrBinaryNotFound) {
		t.Errorf("Initialize after a failed Check: %v; want ErrBinaryNotFound", err)
	}
}

func conformCommand(t *testing.T, c Case) {
	// The worker's environment: a secret, a DROVER_* variable of its own and
	// a TMPDIR of its own. None of them may reach the CLI.
	t.Setenv(canaryName, canaryValue)
	t.Setenv(droverCanaryName, canaryValue)
	t.Setenv("TMPDIR", t.TempDir())

	a := c.New(t)
	wt, tmp := t.TempDir(), t.TempDir()
	in := &adapter.Input{Prompt: c.Prompt, Worktree: wt, TempDir: tmp, Env: conformanceDroverEnv}
	cmd, err := a.Command(in)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if !filepath.IsAbs(cmd.Path) {
		t.Errorf("Command.Path %q is not absolute", cmd.Path)
	}
	if info, err := a.Initialize(t.Context()); err == nil && cmd.Path != info.Binary {
		t.Errorf("Command.Path %s is not the binary Initialize resolved (%s)", cmd.Path, info.Binary)
	}
	env := envMap(t, cmd.Env)
	for _, kv := range conformanceDroverEnv {
		name, v, _ := strings.Cut(kv, "=")
		if got, ok := env[name]; !ok || got != v {
			t.Errorf("Command.Env: %s=%q, want %q (passed in Input.Env)", name, got, v)
		}
	}
	// TMPDIR is the attempt's: a directory in Input.TempDir, which a
	// confined CLI may write; so is a HOME made there.
	if got := env["TMPDIR"]; got != tmp && !strings.HasPrefix(got, tmp+string(filepath.Separator)) {
		t.Errorf("Command.Env: TMPDIR=%q, want Input.TempDir %q or a directory in it", got, tmp)
	} else if info, err := os.Stat(got); err != nil || !info.IsDir() {
		t.Errorf("Command.Env: TMPDIR=%q is not a directory: %v", got, err)
	}
	for _, name := range []string{"TMPDIR", "HOME"} {
		if v := env[name]; strings.HasPrefix(v, tmp+string(filepath.Separator)) && !slices.Contains(cmd.Sandbox.Write, v) {
			t.Errorf("Command.Sandbox.Write %q lacks %s=%s: a confined CLI could not write it", cmd.Sandbox.Write, name, v)
		}
	}
	for _, name := range []string{canaryName, droverCanaryName} {
		if _, ok := env[name]; ok {
			t.Errorf("Command.Env has %s, a variable of the worker outside the allowlist", name)
		}
	}
	if s := strings.Join(cmd.Env, "\n") + strings.Join(cmd.Args, "\n"); strings.Contains(s, canaryValue) {
		t.Errorf("the worker's secret reached the command:\nenv %q\nargs %q", cmd.Env, cmd.Args)
	}
	if ca, ok := a.(*adapter.CommandAdapter); ok {
		allowed := map[string]bool{"TMPDIR": true}
		for _, list := range [][]string{adapter.PassedEnv(ca.Runtime()), envNames(ca.Runtime().Env), envNames(in.Env)} {
			for _, n := range list {
				allowed[n] = true
			}
		}
		for name := range env {
			if !allowed[name] {
				t.Errorf("Command.Env has %s, which neither the allowlist, the runtime's env nor Input.Env names", name)
			}
		}
	}
	if cmd.Timeout < 0 || cmd.NoOutputTimeout < 0 || cmd.Grace < 0 || cmd.MaxOutput < 0 {
		t.Errorf("negative limits: %+v", cmd)
	}
	// Input.Timeout overrides the runtime's when non-zero.
	in2 := *in
	in2.TempDir, in2.Timeout = t.TempDir(), 7*time.Second
	if cmd2, err := a.Command(&in2); err != nil {
		t.Errorf("Command with a Timeout: %v", err)
	} else if cmd2.Timeout != in2.Timeout {
		t.Errorf("Command.Timeout = %s, want Input.Timeout %s", cmd2.Timeout, in2.Timeout)
	}
}

// envMap reads NAME=value entries, failing on a malformed or repeated name:
// a CLI would read a repeated one as either value (Go's getenv takes the
// first, sh the last).
func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			t.Errorf("Command.Env entry %q is not NAME=value", kv)
			continue
		}
		if old, dup := m[name]; dup {
			t.Errorf("Command.Env sets %s twice (%q, then %q): CLIs disagree on which one counts", name, old, v)
			continue
		}
		m[name] = v
	}
	return m
}

func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	return names
}

// conformConcurrent: a worker runs several attempts of one runtime at once;
// under -race this finds unsynchronised state.
func conformConcurrent(t *testing.T, c Case) {
	a := c.New(t)
	hc, _ := a.(adapter.HealthChecker)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		tmp := t.TempDir()
		wg.Go(func() {
			if i%2 == 0 && hc != nil {
				if _, err := hc.Check(t.Context()); err != nil {
					errs <- fmt.Errorf("calling Check: %w", err)
				}
			}
			if _, err := a.Initialize(t.Context()); err != nil {
				errs <- fmt.Errorf("calling Initialize: %w", err)
				return
			}
			if _, err := a.Command(&adapter.Input{Prompt: c.Prompt, TempDir: tmp, Env: conformanceDroverEnv}); err != nil {
				errs <- fmt.Errorf("calling Command: %w", err)
			}
			_ = a.Capabilities()
			_ = a.Classify(&supervise.Result{Outcome: supervise.Exited, ExitCode: 1}, nil)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func conformTimeout(t *testing.T, c Case) {
	a := c.New(t)
	or, _ := a.(adapter.OutputReader)
	for _, res := range []supervise.Result{
		{Outcome: supervise.TimedOut, ExitCode: -1, Signal: "terminated", StopCause: supervise.ErrTimeout},
		{Outcome: supervise.TimedOut, ExitCode: -1, Signal: "killed", Killed: true, StopCause: supervise.ErrTimeout},
		{Outcome: supervise.Hung, ExitCode: -1, Signal: "terminated", StopCause: supervise.ErrNoOutput},
	} {
		sums := map[string]*transcript.Summary{"no summary": nil}
		if or != nil {
			// What the parser makes of a run killed before it printed anything.
			sums["empty output"] = or.NewParser().Summary(res.ExitCode)
		}
		for what, sum := range sums {
			if e := a.Classify(&res, sum); e == nil || e.Class != drovertype.ClassTimeout {
				t.Errorf("Classify(%s, %s) = %v, want %s", res.Outcome, what, e, drovertype.ClassTimeout)
			}
		}
	}
}

// conformResult is one real run of the CLI.
type conformResult struct {
	dir string // the worktree it ran in
	cmd *adapter.Command
	res *supervise.Result
	sum *transcript.Summary // nil when the adapter reads no output
}

func (r *conformResult) dump() string {
	return fmt.Sprintf("\nargv: %s %q\nstdout:\n%s\nstderr:\n%s", r.cmd.Path, r.cmd.Args, r.res.Stdout.String(), r.res.Stderr.String())
}

// conformRun runs the adapter's command for prompt under supervision in a
// fresh worktree, feeding its output to the adapter's parser.
func conformRun(t *testing.T, c Case, a adapter.Adapter, prompt string) *conformResult {
	t.Helper()
	r := &conformResult{dir: t.TempDir()}
	cmd, err := a.Command(&adapter.Input{Prompt: prompt, Worktree: r.dir, TempDir: t.TempDir(), Env: conformanceDroverEnv})
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	r.cmd = cmd
	limit := cmp.Or(c.RunTimeout, 60*time.Second)
	timeout := cmd.Timeout
	if timeout <= 0 || timeout > limit {
		timeout = limit
	}
	spec := supervise.Spec{
		Path: cmd.Path, Args: cmd.Args, Dir: r.dir, Env: mergeConformEnv(cmd.Env, c.Env), Stdin: cmd.Stdin,
		Timeout: timeout, NoOutputTimeout: cmd.NoOutputTimeout, Grace: cmd.Grace, MaxCapture: cmd.MaxOutput,
	}
	var parser transcript.Parser
	var outW, errW io.WriteCloser
	if or, ok := a.(adapter.OutputReader); ok {
		parser = or.NewParser()
		outW, errW = transcript.NewLineWriter(parser, transcript.Stdout), transcript.NewLineWriter(parser, transcript.Stderr)
		spec.OnOutput = func(s supervise.Stream, p []byte) {
			if s == supervise.Stderr {
				_, _ = errW.Write(p)
			} else {
				_, _ = outW.Write(p)
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout+2*cmp.Or(cmd.Grace, supervise.DefaultGrace))
	defer cancel()
	p, err := supervise.Start(ctx, spec)
	if err != nil {
		t.Fatalf("supervise.Start %s %q: %v", cmd.Path, cmd.Args, err)
	}
	r.res = p.Wait()
	if r.res.Err != nil {
		t.Fatalf("supervise: %v", r.res.Err)
	}
	if parser != nil {
		_ = outW.Close()
		_ = errW.Close()
		r.sum = parser.Summary(r.res.ExitCode)
	}
	return r
}

// mergeConformEnv returns env with extra's NAME=value entries replacing or
// adding to it.
func mergeConformEnv(env, extra []string) []string {
	out := slices.Clone(env)
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}

func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return exectest.WriteExecutable(dst, b)
}
