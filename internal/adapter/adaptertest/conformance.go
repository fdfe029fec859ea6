package adaptertest

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exectest"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
)

// Case tells RunConformance how to make the runtime under test and what
// its agent (a fake CLI, a scripted model) does.
type Case struct {
	// Name names the case's subtest; empty runs the checks directly under t.
	Name string
	// New returns the runtime, configured to run a fake agent.
	New func(t *testing.T) adapter.Adapter
	// NewMissing returns the same runtime without what the host must
	// provide (a binary that does not exist, an API key not set).
	// Optional: for a *adapter.CommandAdapter the suite derives it;
	// otherwise, when nil, that check is skipped.
	NewMissing func(t *testing.T) adapter.Adapter
	// Prompt makes the agent succeed and write hello.txt in its working
	// directory. For the demo-agent personas:
	// "create hello.txt containing hi\n@case success".
	Prompt string
	// FailPrompt makes the agent fail, e.g. with a rate limit (429):
	// "create hello.txt containing hi\n@case fail-429". Empty skips the check.
	FailPrompt string
	// WantClassOnFail is the class Classify must give the FailPrompt run,
	// e.g. drovertype.ClassRateLimited.
	WantClassOnFail drovertype.ErrorClass
	// WantStatusOnFail is the HTTP status the failure must report (429 for
	// a rate limit); 0 does not check it.
	WantStatusOnFail int
	// Env is extra environment the fake agent needs to run (where its
	// recordings are, IS_SANDBOX=1…), passed with Drover's own variables
	// (Input.Env) to every task the suite starts.
	Env []string
	// RunTimeout bounds each task the suite starts; 0 means 60s.
	RunTimeout time.Duration
	// Agent are the prompts of the checks that need the agent to do more
	// (lifecycle.go).
	Agent AgentPrompts
}

// AgentPrompts make the agent behave as a check needs, beside
// Case.Prompt (write hello.txt) and Case.FailPrompt. For the demo agent
// and its personas these are its directives (docs/demo-agent.md); for the
// native runtime's scripted model, directives too
// (internal/native/nativetest, Directed).
type AgentPrompts struct {
	// Hang: the agent never ends by itself, until it is stopped. Required.
	Hang string
	// Env: the agent runs a command that writes its environment to env.txt.
	// Empty skips the check of what the task's processes see (Inspect's
	// Env is checked still).
	Env string
	// Scope: the agent writes inside/ok.txt, then outside.txt, then
	// ../escaped.txt (beside the worktree), each a call of its own.
	// Required for a runtime that prevents changes outside the scope
	// (adapter.ScopePrevented).
	Scope string
}

// conformanceDroverEnv is what the suite passes as Drover's own variables.
var conformanceDroverEnv = []string{"DROVER_TASK_ID=conformance-task", "DROVER_ATTEMPT_ID=conformance-attempt-1"}

// Canaries set in the test process's environment: neither may reach a task.
const (
	canaryName       = "DROVER_CONFORMANCE_CANARY_SECRET"
	canaryValue      = "canary-9f3c2b7e-must-not-leak"
	droverCanaryName = "DROVER_WORKER_CANARY" // a DROVER_* of the worker, not of the attempt
)

// RunConformance checks, each in a subtest, what the runtime contract
// (adapter.Adapter and its Handle) promises, the same for a CLI and for a
// runtime in the worker: a name; Initialize (idempotent, agreeing with a
// HealthChecker's Check, failing without what the host must provide, not
// cached as a success); capabilities and the evaluation of an attempt;
// tasks started that succeed and change the worktree, that fail with the
// case's class, that time out as RUNTIME_TIMEOUT, and that stop at once
// on Stop's cause and on ctx's; what Inspect says (what runs, the
// environment of its processes: Drover's variables, a private TMPDIR,
// nothing else of the worker's) and what the task asks of its sandbox; a
// change outside the scope refused, never made, by a runtime that says it
// prevents them; a bad input refused; safety for concurrent use.
// What only some runtimes do is checked where the runtime says it does it
// (an OutputReader, a *CommandAdapter's binary).
//
// It calls t.Setenv, so neither t nor its parents may be parallel tests.
func RunConformance(t *testing.T, c Case) {
	t.Helper()
	switch {
	case c.New == nil || c.Prompt == "":
		t.Fatalf("conformance case %q: New and Prompt are required", c.Name)
	case c.FailPrompt != "" && c.WantClassOnFail == "":
		t.Fatalf("conformance case %q: FailPrompt needs WantClassOnFail", c.Name)
	case c.Agent.Hang == "":
		t.Fatalf("conformance case %q: Agent.Hang is required (the timeout and stop checks)", c.Name)
	}
	if c.Name == "" {
		runConformance(t, c)
		return
	}
	t.Run(c.Name, func(t *testing.T) { runConformance(t, c) })
}

func runConformance(t *testing.T, c Case) {
	t.Run("Name", func(t *testing.T) {
		if c.New(t).Name() == "" {
			t.Error("Name() is empty")
		}
	})
	t.Run("Initialize", func(t *testing.T) { conformInitialize(t, c) })
	t.Run("Missing", func(t *testing.T) { conformMissing(t, c) })
	t.Run("HealthCheckNoticesRemoval", func(t *testing.T) { conformRemoval(t, c) })
	t.Run("Capabilities", func(t *testing.T) { conformCapabilities(t, c) })
	t.Run("Command", func(t *testing.T) { conformCommand(t, c) })
	t.Run("RunSucceeds", func(t *testing.T) { conformSucceeds(t, c) })
	t.Run("RunFails", func(t *testing.T) { conformFails(t, c) })
	t.Run("ClassifyTimeout", func(t *testing.T) { conformClassifyTimeout(t, c) })
	t.Run("Timeout", func(t *testing.T) { conformTimeout(t, c) })
	t.Run("Stop", func(t *testing.T) { conformStop(t, c) })
	t.Run("Environment", func(t *testing.T) { conformEnv(t, c) })
	t.Run("Scope", func(t *testing.T) { conformScope(t, c) })
	t.Run("BadInput", func(t *testing.T) {
		a := c.New(t)
		in := adapter.Input{Prompt: c.Prompt, Worktree: filepath.Join(t.TempDir(), "missing"), TempDir: t.TempDir(), Env: conformanceDroverEnv}
		if h, err := a.Start(t.Context(), &adapter.Task{Input: in}); err == nil {
			t.Errorf("Start in a worktree that does not exist succeeded: %+v, %+v", h.Inspect(), h.Wait())
		}
	})
	t.Run("Concurrent", func(t *testing.T) { conformConcurrent(t, c) })
}

func conformInitialize(t *testing.T, c Case) {
	a := c.New(t)
	ctx := t.Context()
	info, err := a.Initialize(ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if info == nil || info.Adapter == "" || info.Binary == "" {
		t.Fatalf("Initialize = %+v: Adapter and Binary (the CLI, or what it talks to) must be set", info)
	}
	if again, err := a.Initialize(ctx); err != nil || *again != *info {
		t.Errorf("Initialize is not idempotent: %+v, then %+v, %v", info, again, err)
	}
	if hc, ok := a.(adapter.HealthChecker); ok {
		checked, err := hc.Check(ctx)
		if err != nil {
			t.Fatalf("Initialize succeeded but Check fails: %v", err)
		}
		if checked.Adapter != info.Adapter || checked.Binary != info.Binary {
			t.Errorf("Check says %+v, Initialize %+v", checked, info)
		}
		// What the check learned is what Initialize vouches for from then on.
		if after, err := a.Initialize(ctx); err != nil || *after != *checked {
			t.Errorf("Initialize after Check: %+v, %v; want %+v", after, err, checked)
		}
	}
	t.Logf("%s: %s %s, version %q", a.Name(), info.Adapter, info.Binary, info.Version)
}

// missingAdapter is the case's runtime without what the host must
// provide, whether the suite derived it (a *CommandAdapter's binary
// replaced by one that does not exist), or nil with the reason why the
// case cannot express it.
func missingAdapter(t *testing.T, c Case) (a adapter.Adapter, derived bool, why string) {
	if c.NewMissing != nil {
		return c.NewMissing(t), false, ""
	}
	if ca, ok := c.New(t).(*adapter.CommandAdapter); ok {
		rt := ca.Runtime()
		rt.Binary = "/nonexistent/" + filepath.Base(cmp.Or(rt.Binary, "agent"))
		return adapter.NewCommand(ca.Name(), rt), true, ""
	}
	return nil, false, "the case has no NewMissing and its adapter is not a *CommandAdapter"
}

func conformMissing(t *testing.T, c Case) {
	a, binary, why := missingAdapter(t, c)
	if a == nil {
		t.Skip(why)
	}
	ctx := t.Context()
	// A missing binary is ErrBinaryNotFound; anything else missing, an error.
	wrong := func(err error) bool { return err == nil || binary && !errors.Is(err, adapter.ErrBinaryNotFound) }
	for i := range 2 {
		if info, err := a.Initialize(ctx); wrong(err) {
			t.Errorf("Initialize %d without what the host must provide = %+v, %v; want an error (ErrBinaryNotFound for a binary), and no cached success", i+1, info, err)
		}
	}
	if hc, ok := a.(adapter.HealthChecker); ok {
		if info, err := hc.Check(ctx); wrong(err) {
			t.Errorf("Check without what the host must provide = %+v, %v; want an error", info, err)
		}
	}
	if !binary {
		return
	}
	if h, err := a.Start(ctx, &adapter.Task{Input: adapter.Input{Prompt: "p", Worktree: t.TempDir(), TempDir: t.TempDir()}}); !errors.Is(err, adapter.ErrBinaryNotFound) {
		if h != nil {
			h.Stop(nil)
			h.Wait()
		}
		t.Errorf("Start with a missing binary: %v, want ErrBinaryNotFound", err)
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

func conformCapabilities(t *testing.T, c Case) {
	a := c.New(t)
	caps := a.Capabilities()
	if !caps.SupportsNonInteractive {
		t.Error("SupportsNonInteractive is false: Drover runs every runtime headless")
	}
	if len(caps.AvailableModels) > 0 && !caps.SupportsModel {
		t.Errorf("AvailableModels %v but SupportsModel is false", caps.AvailableModels)
	}
	ev := adapter.Evaluate(a, "conformance-model")
	if ev.Model != "conformance-model" || ev.ScopeEnforcement == "" {
		t.Errorf("Evaluate = %+v: the model asked for, and how the scope holds", ev)
	}
}

// conformCommand checks what a *CommandAdapter builds before it starts
// anything: limits that are not negative, and the task's Timeout in place
// of the runtime's.
func conformCommand(t *testing.T, c Case) {
	ca, ok := c.New(t).(*adapter.CommandAdapter)
	if !ok {
		t.Skip("only a *CommandAdapter builds a command")
	}
	in := &adapter.Input{Prompt: c.Prompt, Worktree: t.TempDir(), TempDir: t.TempDir(), Env: conformanceDroverEnv}
	cmd, err := ca.Command(in)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if cmd.Timeout < 0 || cmd.NoOutputTimeout < 0 || cmd.Grace < 0 || cmd.MaxOutput < 0 {
		t.Errorf("negative limits: %+v", cmd)
	}
	in.TempDir, in.Timeout = t.TempDir(), 7*time.Second
	if cmd, err := ca.Command(in); err != nil {
		t.Errorf("Command with a Timeout: %v", err)
	} else if cmd.Timeout != in.Timeout {
		t.Errorf("Command.Timeout = %s, want Input.Timeout %s", cmd.Timeout, in.Timeout)
	}
}

// envMap reads NAME=value entries, failing on a malformed or repeated name:
// a CLI would read a repeated one as either value (Go's getenv takes the
// first, sh the last).
func envMap(t *testing.T, what string, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			t.Errorf("%s: entry %q is not NAME=value", what, kv)
			continue
		}
		if old, dup := m[name]; dup {
			t.Errorf("%s sets %s twice (%q, then %q): CLIs disagree on which one counts", what, name, old, v)
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

// mergeEnv returns env with extra's NAME=value entries replacing or
// adding to it.
func mergeEnv(env, extra []string) []string {
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
