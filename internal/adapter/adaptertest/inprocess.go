package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

// InProcessPrompts make an in-process runtime's agent behave as a check
// needs, beside Case.Prompt (write hello.txt) and Case.FailPrompt. For the
// native runtime's scripted model these are directives
// (internal/native/nativetest, Directed).
type InProcessPrompts struct {
	// Hang: the model never answers, until the run is stopped.
	Hang string
	// Env: the agent runs a command that writes its environment to env.txt.
	Env string
	// Scope: the agent writes inside/ok.txt, then outside.txt, then
	// ../escaped.txt (beside the worktree), each a call of its own.
	Scope string
}

// runInProcess checks what an adapter.InProcess promises: a name;
// Initialize and Check (agreeing, idempotent, failing without what the
// host must provide, not cached as a success); capabilities; no command
// (ErrInProcess) but an Argv naming the model; runs that succeed and
// change the worktree, that fail with the case's class, that time out as
// RUNTIME_TIMEOUT and that stop at once on ctx's cause; the commands it
// runs see Drover's variables and TMPDIR and nothing else of the worker's;
// a change outside the scope or the worktree refused and recorded, never
// made; a bad input refused; safety for concurrent use.
//
// It calls t.Setenv, so neither t nor its parents may be parallel tests.
func runInProcess(t *testing.T, c Case) {
	p := c.InProcess
	if p.Hang == "" || p.Env == "" || p.Scope == "" {
		t.Fatalf("conformance case %q: an in-process runtime needs InProcess.Hang, Env and Scope", c.Name)
	}
	t.Run("Name", func(t *testing.T) {
		if inProcess(t, c).Name() == "" {
			t.Error("Name() is empty")
		}
	})
	t.Run("Initialize", func(t *testing.T) { inProcessInitialize(t, c) })
	t.Run("Unconfigured", func(t *testing.T) { inProcessMissing(t, c) })
	t.Run("Capabilities", func(t *testing.T) { inProcessCapabilities(t, c) })
	t.Run("RunSucceeds", func(t *testing.T) { inProcessSucceeds(t, c) })
	t.Run("RunFails", func(t *testing.T) { inProcessFails(t, c) })
	t.Run("Timeout", func(t *testing.T) { inProcessTimeout(t, c) })
	t.Run("Cancel", func(t *testing.T) { inProcessCancel(t, c) })
	t.Run("Environment", func(t *testing.T) { inProcessEnv(t, c) })
	t.Run("Scope", func(t *testing.T) { inProcessScope(t, c) })
	t.Run("BadInput", func(t *testing.T) {
		a := inProcess(t, c)
		if res, err := a.Run(t.Context(), &adapter.RunInput{Input: adapter.Input{Prompt: c.Prompt, Worktree: filepath.Join(t.TempDir(), "missing")}}, nil); err == nil {
			t.Errorf("Run in a worktree that does not exist = %+v, want an error", res)
		}
	})
	t.Run("Concurrent", func(t *testing.T) { inProcessConcurrent(t, c) })
}

func inProcess(t *testing.T, c Case) adapter.InProcess {
	t.Helper()
	a, ok := c.New(t).(adapter.InProcess)
	if !ok {
		t.Fatal("the case's adapter is not an adapter.InProcess")
	}
	return a
}

func inProcessInitialize(t *testing.T, c Case) {
	a := inProcess(t, c)
	ctx := t.Context()
	info, err := a.Initialize(ctx)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if info == nil || info.Adapter == "" || info.Binary == "" {
		t.Fatalf("Initialize = %+v: Adapter and Binary (what it talks to) must be set", info)
	}
	if again, err := a.Initialize(ctx); err != nil || *again != *info {
		t.Errorf("Initialize is not idempotent: %+v, then %+v, %v", info, again, err)
	}
	hc, ok := a.(adapter.HealthChecker)
	if !ok {
		return
	}
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

func inProcessMissing(t *testing.T, c Case) {
	if c.NewMissing == nil {
		t.Skip("the case has no NewMissing")
	}
	a := c.NewMissing(t)
	ctx := t.Context()
	for i := range 2 {
		if info, err := a.Initialize(ctx); err == nil {
			t.Errorf("Initialize %d of an unconfigured runtime = %+v, want an error (and no cached success)", i+1, info)
		}
	}
	if hc, ok := a.(adapter.HealthChecker); ok {
		if info, err := hc.Check(ctx); err == nil {
			t.Errorf("Check of an unconfigured runtime = %+v, want an error", info)
		}
	}
}

func inProcessCapabilities(t *testing.T, c Case) {
	a := inProcess(t, c)
	caps := a.Capabilities()
	if !caps.SupportsNonInteractive {
		t.Error("SupportsNonInteractive is false: Drover runs every runtime headless")
	}
	if len(caps.AvailableModels) > 0 && !caps.SupportsModel {
		t.Errorf("AvailableModels %v but SupportsModel is false", caps.AvailableModels)
	}
	if cmd, err := a.Command(&adapter.Input{Prompt: c.Prompt, Worktree: t.TempDir(), TempDir: t.TempDir()}); !errors.Is(err, adapter.ErrInProcess) {
		t.Errorf("Command = %+v, %v; want ErrInProcess: an in-process runtime runs no process", cmd, err)
	}
	if argv := a.Argv("conformance-model"); len(argv) == 0 || !slices.Contains(argv, "conformance-model") {
		t.Errorf("Argv(conformance-model) = %q: it stands for what runs, model included", argv)
	}
	if ev := adapter.Evaluate(a, "conformance-model"); ev.Model != "conformance-model" || ev.ScopeEnforcement == "" {
		t.Errorf("Evaluate = %+v: the model asked for, and how the scope holds", ev)
	}
}

// writes records each Write an in-process run makes.
type writes struct {
	mu sync.Mutex
	w  []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, string(p))
	return len(p), nil
}

func (w *writes) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.w, "")
}

// inProcessRun runs prompt in a fresh worktree.
func inProcessRun(t *testing.T, a adapter.InProcess, in adapter.RunInput) (*adapter.RunResult, string, *writes) {
	t.Helper()
	if in.Worktree == "" {
		in.Worktree = t.TempDir()
	}
	if in.TempDir == "" {
		in.TempDir = t.TempDir()
	}
	if in.Env == nil {
		in.Env = conformanceDroverEnv
	}
	out := &writes{}
	res, err := a.Run(t.Context(), &in, out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res == nil {
		t.Fatal("Run returned neither a result nor an error")
	}
	return res, in.Worktree, out
}

func inProcessSucceeds(t *testing.T, c Case) {
	a := inProcess(t, c)
	res, dir, out := inProcessRun(t, a, adapter.RunInput{Input: adapter.Input{Prompt: c.Prompt}})
	if res.Err != nil {
		t.Fatalf("a successful run failed: %v\n%s", res.Err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || len(b) == 0 {
		t.Errorf("hello.txt not written (%v)\n%s", err, out)
	}
	if res.Outcome == "" || res.Turns < 1 || res.Started.IsZero() || res.Ended.Before(res.Started) || res.StopCause != nil {
		t.Errorf("result %+v: an outcome, turns, and the run's bounds", res)
	}
	if res.Usage.Model == "" {
		t.Errorf("usage %+v names no model", res.Usage)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.w) == 0 {
		t.Fatal("nothing was written to out: the attempt's log and live output would be empty")
	}
	for _, w := range out.w {
		if !strings.HasSuffix(w, "\n") || strings.Count(w, "\n") != 1 {
			t.Errorf("a Write is not one whole line (one event): %q", w)
		}
	}
}

func inProcessFails(t *testing.T, c Case) {
	if c.FailPrompt == "" {
		t.Skip("the case has no FailPrompt")
	}
	res, _, out := inProcessRun(t, inProcess(t, c), adapter.RunInput{Input: adapter.Input{Prompt: c.FailPrompt}})
	e := res.Err
	switch {
	case e == nil:
		t.Fatalf("the failing run succeeded, want %s\n%s", c.WantClassOnFail, out)
	case e.Class != c.WantClassOnFail:
		t.Errorf("class %v, want %s\n%s", e, c.WantClassOnFail, out)
	case c.WantStatusOnFail != 0 && e.Status != c.WantStatusOnFail:
		t.Errorf("error %v with Status %d, want %d", e, e.Status, c.WantStatusOnFail)
	}
	if e.Category == "" || e.Message == "" {
		t.Errorf("error %+v: Category and Message must be set", e)
	}
	if e.Class == drovertype.ClassRateLimited && !e.Recoverable {
		t.Errorf("a rate limit must be Recoverable: %+v", e)
	}
}

// stopBound is how long a run may take to end once it must: it is told at
// once, so this only catches a run that never ends.
const stopBound = 20 * time.Second

func inProcessTimeout(t *testing.T, c Case) {
	a := inProcess(t, c)
	start := time.Now()
	res, _, out := inProcessRun(t, a, adapter.RunInput{Input: adapter.Input{Prompt: c.InProcess.Hang, Timeout: 300 * time.Millisecond}})
	if took := time.Since(start); took > stopBound {
		t.Errorf("a run with a 300ms timeout took %s", took)
	}
	if res.Err == nil || res.Err.Class != drovertype.ClassTimeout || !res.Err.Recoverable {
		t.Errorf("error %+v, want a recoverable %s\n%s", res.Err, drovertype.ClassTimeout, out)
	}
	if res.StopCause != nil {
		t.Errorf("a timeout is not a stop by the caller: StopCause %v", res.StopCause)
	}
}

func inProcessCancel(t *testing.T, c Case) {
	a := inProcess(t, c)
	cause := errors.New("conformance: the operator cancelled")
	ctx, cancel := context.WithCancelCause(t.Context())
	timer := time.AfterFunc(200*time.Millisecond, func() { cancel(cause) })
	defer timer.Stop()
	start := time.Now()
	res, err := a.Run(ctx, &adapter.RunInput{Input: adapter.Input{Prompt: c.InProcess.Hang, Worktree: t.TempDir(), TempDir: t.TempDir()}}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > stopBound {
		t.Errorf("the run took %s to stop", took)
	}
	if !errors.Is(res.StopCause, cause) || res.Err == nil {
		t.Errorf("StopCause %v, error %v: want ctx's cause, and a failure", res.StopCause, res.Err)
	}
}

func inProcessEnv(t *testing.T, c Case) {
	t.Setenv(canaryName, canaryValue)
	t.Setenv(droverCanaryName, canaryValue)
	t.Setenv("TMPDIR", t.TempDir())
	a := inProcess(t, c)
	tmp := t.TempDir()
	res, dir, out := inProcessRun(t, a, adapter.RunInput{Input: adapter.Input{Prompt: c.InProcess.Env, TempDir: tmp}})
	if res.Err != nil {
		t.Fatalf("run: %v\n%s", res.Err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatalf("env.txt: %v\n%s", err, out)
	}
	seen := strings.Split(strings.TrimSpace(string(b)), "\n")
	for name, env := range map[string][]string{"the command's": seen, "RunResult.Env": res.Env} {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		for _, kv := range conformanceDroverEnv {
			k, v, _ := strings.Cut(kv, "=")
			if m[k] != v {
				t.Errorf("%s environment: %s=%q, want %q", name, k, m[k], v)
			}
		}
		if m["TMPDIR"] != tmp {
			t.Errorf("%s environment: TMPDIR=%q, want Input.TempDir %q", name, m["TMPDIR"], tmp)
		}
		if _, ok := m[canaryName]; ok || strings.Contains(strings.Join(env, "\n"), canaryValue) {
			t.Errorf("%s environment has the worker's secret", name)
		}
		if _, ok := m[droverCanaryName]; ok {
			t.Errorf("%s environment has %s, a variable of the worker", name, droverCanaryName)
		}
	}
}

func inProcessScope(t *testing.T, c Case) {
	a := inProcess(t, c)
	parent := t.TempDir()
	dir := filepath.Join(parent, "wt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	res, _, out := inProcessRun(t, a, adapter.RunInput{Input: adapter.Input{Prompt: c.InProcess.Scope, Worktree: dir},
		Scope: &flow.Scope{Allow: []string{"inside/**"}}})
	if res.Err != nil {
		t.Fatalf("a refused change failed the run: %v\n%s", res.Err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "inside", "ok.txt")); err != nil {
		t.Errorf("the allowed write did not happen: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "outside.txt"), filepath.Join(parent, "escaped.txt")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written (%v): a change outside the scope or the worktree happened", p, err)
		}
	}
	if len(res.Refusals) != 2 || !strings.Contains(res.Refusals[0], "outside.txt") || !strings.Contains(res.Refusals[1], "escaped.txt") {
		t.Errorf("refusals %q, want outside.txt then ../escaped.txt", res.Refusals)
	}
}

func inProcessConcurrent(t *testing.T, c Case) {
	a := inProcess(t, c)
	hc, _ := a.(adapter.HealthChecker)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 6 {
		dir, tmp := t.TempDir(), t.TempDir()
		wg.Go(func() {
			if i%2 == 0 && hc != nil {
				if _, err := hc.Check(t.Context()); err != nil {
					errs <- fmt.Errorf("calling Check: %w", err)
				}
			}
			if _, err := a.Initialize(t.Context()); err != nil {
				errs <- fmt.Errorf("calling Initialize: %w", err)
			}
			_ = a.Capabilities()
			res, err := a.Run(t.Context(), &adapter.RunInput{Input: adapter.Input{Prompt: c.Prompt, Worktree: dir, TempDir: tmp, Env: conformanceDroverEnv}}, &writes{})
			switch {
			case err != nil:
				errs <- fmt.Errorf("calling Run: %w", err)
			case res.Err != nil:
				errs <- fmt.Errorf("calling Run: %w", res.Err)
			default:
				if _, err := os.Stat(filepath.Join(dir, "hello.txt")); err != nil {
					errs <- fmt.Errorf("run %d: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
