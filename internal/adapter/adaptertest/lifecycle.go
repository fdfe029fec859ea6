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

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// stopBound is how long a task may take to end once it must: it is told at
// once, so this only catches a task that never ends.
const stopBound = 20 * time.Second

// writes records what a task wrote, one entry a call.
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

// task is one task the suite started, and what it saw of it.
type task struct {
	a      adapter.Adapter
	in     adapter.Input
	needs  *adapter.Needs // what it asked of the sandbox; nil if nothing
	stdout writes         // its Output, by stream
	stderr writes
	log    writes // its Log
	parser transcript.Parser
	lines  map[supervise.Stream]io.WriteCloser
	h      adapter.Handle
	status adapter.Status
}

// start starts t (its Input defaulted: a fresh worktree and temp dir,
// Drover's variables and the case's, the case's RunTimeout) with ctx,
// recording what it asks of the sandbox (and confining nothing), its
// output, fed to the runtime's parser if it has one, and its log. The
// task is stopped and waited for when the test ends.
func start(tb testing.TB, ctx context.Context, c Case, a adapter.Adapter, t adapter.Task) (*task, error) {
	in := &t.Input
	if in.Worktree == "" {
		in.Worktree = tb.TempDir()
	}
	if in.TempDir == "" {
		in.TempDir = tb.TempDir()
	}
	if in.Env == nil {
		in.Env = mergeEnv(conformanceDroverEnv, c.Env)
	}
	if in.Timeout == 0 {
		in.Timeout = cmp.Or(c.RunTimeout, 60*time.Second)
	}
	r := &task{a: a, in: *in}
	if or, ok := a.(adapter.OutputReader); ok {
		r.parser = or.NewParser()
		r.lines = map[supervise.Stream]io.WriteCloser{
			supervise.Stdout: transcript.NewLineWriter(r.parser, transcript.Stdout),
			supervise.Stderr: transcript.NewLineWriter(r.parser, transcript.Stderr),
		}
	}
	t.Confine = func(n adapter.Needs) (adapter.Confiner, error) {
		if r.needs != nil {
			return nil, errors.New("conformance: Confine asked twice")
		}
		r.needs = &n
		return nil, nil
	}
	t.Output = func(s supervise.Stream, p []byte) {
		if s == supervise.Stderr {
			_, _ = r.stderr.Write(p)
		} else {
			_, _ = r.stdout.Write(p)
		}
		if w := r.lines[s]; w != nil {
			_, _ = w.Write(p)
		}
	}
	t.Log = &r.log
	h, err := a.Start(ctx, &t)
	if err != nil {
		return nil, err
	}
	r.h, r.status = h, h.Inspect()
	tb.Cleanup(func() {
		h.Stop(errors.New("conformance: the test is over"))
		h.Wait()
	})
	return r, nil
}

// mustStart is start, failing the test on an error.
func mustStart(t *testing.T, ctx context.Context, c Case, a adapter.Adapter, tk adapter.Task) *task {
	t.Helper()
	r, err := start(t, ctx, c, a, tk)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

// wait waits for the task and judges it: its Exit, its output's summary
// (nil for a runtime that reads none) and Classify's verdict.
func (r *task) wait() (*adapter.Exit, *transcript.Summary, *adapter.Error) {
	exit := r.h.Wait()
	var sum *transcript.Summary
	if r.parser != nil {
		for _, w := range r.lines {
			_ = w.Close()
		}
		sum = r.parser.Summary(exit.ExitCode)
	}
	return exit, sum, r.a.Classify(exit, sum)
}

func (r *task) dump() string {
	return fmt.Sprintf("\nargv: %q\nstdout:\n%s\nstderr:\n%s", r.status.Argv, r.stdout.String(), r.stderr.String())
}

func conformSucceeds(t *testing.T, c Case) {
	// The worker's environment: a secret, a DROVER_* variable of its own and
	// a TMPDIR of its own. None of them may reach the task.
	t.Setenv(canaryName, canaryValue)
	t.Setenv(droverCanaryName, canaryValue)
	t.Setenv("TMPDIR", t.TempDir())
	a := c.New(t)
	r := mustStart(t, t.Context(), c, a, adapter.Task{Input: adapter.Input{Prompt: c.Prompt}})
	conformStatus(t, c, r)
	exit, _, e := r.wait()
	if e != nil {
		t.Errorf("Classify of a successful run = %v, want nil (Exit %+v)%s", e, exit, r.dump())
	}
	if b, err := os.ReadFile(filepath.Join(r.in.Worktree, "hello.txt")); err != nil || len(b) == 0 {
		t.Errorf("hello.txt not written (%v): the prompt did not reach the agent, or it did not act%s", err, r.dump())
	}
	if exit.Outcome == "" || exit.Started.IsZero() || exit.Ended.Before(exit.Started) || exit.StopCause != nil {
		t.Errorf("Exit %+v: an outcome, and the run's bounds", exit)
	}
	// The log has every byte of both streams, in the order read.
	if out := len(r.stdout.String()) + len(r.stderr.String()); out == 0 || len(r.log.String()) != out {
		t.Errorf("the task's Output (%d bytes) and Log (%d) disagree, or are empty: the attempt's live output and its log%s",
			out, len(r.log.String()), r.dump())
	}
	if _, reads := a.(adapter.OutputReader); reads {
		return
	}
	// A runtime that reads no CLI output knows its run itself, and its
	// output is its events, one whole line a call.
	if exit.Turns < 1 || exit.Usage.Model == "" {
		t.Errorf("Exit %+v: the turns, and the model that answered", exit)
	}
	r.stdout.mu.Lock()
	defer r.stdout.mu.Unlock()
	for _, w := range r.stdout.w {
		if !strings.HasSuffix(w, "\n") || strings.Count(w, "\n") != 1 {
			t.Errorf("an Output call is not one whole line (one event): %q", w)
		}
	}
}

// conformStatus checks what Inspect says of a task and what it asked of
// its sandbox.
func conformStatus(t *testing.T, c Case, r *task) {
	st := r.status
	if len(st.Argv) == 0 {
		t.Fatalf("Inspect = %+v: Argv says what runs", st)
	}
	if st.Pid > 0 {
		// A process: Argv is its argv, its binary the one Initialize resolved.
		info, err := r.a.Initialize(t.Context())
		if err == nil && st.Argv[0] != info.Binary {
			t.Errorf("Argv[0] %s is not the binary Initialize resolved (%s)", st.Argv[0], info.Binary)
		}
		if fi, err := os.Stat(st.Argv[0]); err != nil || !filepath.IsAbs(st.Argv[0]) || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			t.Errorf("Argv[0] %q is not an absolute path to an executable file (%v)", st.Argv[0], err)
		}
	}
	if n := r.needs; n == nil || !filepath.IsAbs(n.Exec) {
		t.Errorf("the task asked its sandbox for %+v: Confine must be asked, with the absolute path of what it starts", n)
	}
	env := envMap(t, "Inspect's Env", st.Env)
	for _, kv := range conformanceDroverEnv {
		name, v, _ := strings.Cut(kv, "=")
		if got, ok := env[name]; !ok || got != v {
			t.Errorf("Inspect's Env: %s=%q, want %q (passed in Input.Env)", name, got, v)
		}
	}
	// TMPDIR is the attempt's: a directory in Input.TempDir, which a
	// confined process may write; so is a HOME made there.
	tmp := r.in.TempDir
	if got := env["TMPDIR"]; got != tmp && !strings.HasPrefix(got, tmp+string(filepath.Separator)) {
		t.Errorf("Inspect's Env: TMPDIR=%q, want Input.TempDir %q or a directory in it", got, tmp)
	} else if info, err := os.Stat(got); err != nil || !info.IsDir() {
		t.Errorf("Inspect's Env: TMPDIR=%q is not a directory: %v", got, err)
	}
	for _, name := range []string{"TMPDIR", "HOME"} {
		if v := env[name]; r.needs != nil && (v == tmp || strings.HasPrefix(v, tmp+string(filepath.Separator))) && !slices.Contains(r.needs.Sandbox.Write, v) {
			t.Errorf("Needs.Sandbox.Write %q lacks %s=%s: a confined process could not write it", r.needs.Sandbox.Write, name, v)
		}
	}
	for _, name := range []string{canaryName, droverCanaryName} {
		if _, ok := env[name]; ok {
			t.Errorf("Inspect's Env has %s, a variable of the worker outside the allowlist", name)
		}
	}
	if s := strings.Join(st.Env, "\n") + strings.Join(st.Argv, "\n"); strings.Contains(s, canaryValue) {
		t.Errorf("the worker's secret reached the task:\nenv %q\nargv %q", st.Env, st.Argv)
	}
	if ca, ok := r.a.(*adapter.CommandAdapter); ok {
		allowed := map[string]bool{"TMPDIR": true}
		for _, list := range [][]string{adapter.PassedEnv(ca.Runtime()), envNames(ca.Runtime().Env), envNames(r.in.Env)} {
			for _, n := range list {
				allowed[n] = true
			}
		}
		for name := range env {
			if !allowed[name] {
				t.Errorf("Inspect's Env has %s, which neither the allowlist, the runtime's env nor Input.Env names", name)
			}
		}
	}
}

func conformFails(t *testing.T, c Case) {
	if c.FailPrompt == "" {
		t.Skip("the case has no FailPrompt")
	}
	r := mustStart(t, t.Context(), c, c.New(t), adapter.Task{Input: adapter.Input{Prompt: c.FailPrompt}})
	_, _, e := r.wait()
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
}

// conformClassifyTimeout: a process that ran out of time, or stopped
// printing, is a timeout, whatever its (empty) output says.
func conformClassifyTimeout(t *testing.T, c Case) {
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
			if e := a.Classify(adapter.ProcessExit(&res), sum); e == nil || e.Class != drovertype.ClassTimeout {
				t.Errorf("Classify(%s, %s) = %v, want %s", res.Outcome, what, e, drovertype.ClassTimeout)
			}
		}
	}
}

// conformTimeout: the task's Timeout ends a task that never ends by
// itself, as a recoverable RUNTIME_TIMEOUT, not as a stop by the caller.
func conformTimeout(t *testing.T, c Case) {
	start := time.Now()
	r := mustStart(t, t.Context(), c, c.New(t), adapter.Task{Input: adapter.Input{Prompt: c.Agent.Hang, Timeout: 200 * time.Millisecond}})
	exit, _, e := r.wait()
	if took := time.Since(start); took > stopBound {
		t.Errorf("a task with a 200ms timeout took %s", took)
	}
	if e == nil || e.Class != drovertype.ClassTimeout || !e.Recoverable {
		t.Errorf("Classify = %+v, want a recoverable %s%s", e, drovertype.ClassTimeout, r.dump())
	}
	if exit.StopCause != nil {
		t.Errorf("a timeout is not a stop by the caller: StopCause %v", exit.StopCause)
	}
}

// conformStop: a task stops at once with Stop's cause, and with its
// context's; Inspect names the model a task asks for.
func conformStop(t *testing.T, c Case) {
	a := c.New(t)
	// A task that does not stop ends at stopBound, and fails the check.
	in := adapter.Input{Prompt: c.Agent.Hang, Timeout: stopBound}
	if caps := a.Capabilities(); caps.SupportsModel {
		in.Model = "conformance-model"
		if len(caps.AvailableModels) > 0 {
			in.Model = caps.AvailableModels[0]
		}
	}
	cause := errors.New("conformance: the operator cancelled")
	start := time.Now()
	r := mustStart(t, t.Context(), c, a, adapter.Task{Input: in})
	if in.Model != "" && !slices.Contains(r.status.Argv, in.Model) {
		t.Errorf("Argv %q does not name the model %s the task asks for", r.status.Argv, in.Model)
	}
	timer := time.AfterFunc(50*time.Millisecond, func() { r.h.Stop(cause) })
	defer timer.Stop()
	exit, _, e := r.wait()
	if took := time.Since(start); took >= stopBound {
		t.Errorf("the task took %s to stop", took)
	}
	if !errors.Is(exit.StopCause, cause) || e == nil {
		t.Errorf("StopCause %v, Classify %v: want Stop's cause, and a failure%s", exit.StopCause, e, r.dump())
	}

	ctxCause := errors.New("conformance: the claim was lost")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	r = mustStart(t, ctx, c, a, adapter.Task{Input: adapter.Input{Prompt: c.Agent.Hang, Timeout: stopBound}})
	timer = time.AfterFunc(50*time.Millisecond, func() { cancel(ctxCause) })
	defer timer.Stop()
	if exit, _, e = r.wait(); !errors.Is(exit.StopCause, ctxCause) || e == nil {
		t.Errorf("StopCause %v, Classify %v: want the context's cause, and a failure%s", exit.StopCause, e, r.dump())
	}
}

// conformEnv: the task's processes see Drover's variables and TMPDIR, and
// nothing else of the worker's; Inspect says what they see.
func conformEnv(t *testing.T, c Case) {
	if c.Agent.Env == "" {
		t.Skip("the case has no Agent.Env prompt; RunSucceeds checked Inspect's Env")
	}
	t.Setenv(canaryName, canaryValue)
	t.Setenv(droverCanaryName, canaryValue)
	t.Setenv("TMPDIR", t.TempDir())
	tmp := t.TempDir()
	r := mustStart(t, t.Context(), c, c.New(t), adapter.Task{Input: adapter.Input{Prompt: c.Agent.Env, TempDir: tmp}})
	if _, _, e := r.wait(); e != nil {
		t.Fatalf("run: %v%s", e, r.dump())
	}
	b, err := os.ReadFile(filepath.Join(r.in.Worktree, "env.txt"))
	if err != nil {
		t.Fatalf("env.txt: %v%s", err, r.dump())
	}
	seen := strings.Split(strings.TrimSpace(string(b)), "\n")
	for name, env := range map[string][]string{"the command's": seen, "Inspect's": r.status.Env} {
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

// conformScope: a runtime that says it prevents changes outside the
// task's scope refuses them, and says so; the allowed change happens.
func conformScope(t *testing.T, c Case) {
	a := c.New(t)
	if adapter.Evaluate(a, "").ScopeEnforcement != adapter.ScopePrevented {
		t.Skip("the runtime does not prevent changes outside the scope: the check after the run finds them")
	}
	if c.Agent.Scope == "" {
		t.Fatal("the runtime says it prevents changes outside the scope, and the case has no Agent.Scope prompt")
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "wt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := mustStart(t, t.Context(), c, a, adapter.Task{Input: adapter.Input{Prompt: c.Agent.Scope, Worktree: dir},
		Scope: &flow.Scope{Allow: []string{"inside/**"}}})
	exit, _, e := r.wait()
	if e != nil {
		t.Fatalf("a refused change failed the run: %v%s", e, r.dump())
	}
	if _, err := os.Stat(filepath.Join(dir, "inside", "ok.txt")); err != nil {
		t.Errorf("the allowed write did not happen: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "outside.txt"), filepath.Join(parent, "escaped.txt")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written (%v): a change outside the scope or the worktree happened", p, err)
		}
	}
	if len(exit.Refusals) != 2 || !strings.Contains(exit.Refusals[0], "outside.txt") || !strings.Contains(exit.Refusals[1], "escaped.txt") {
		t.Errorf("refusals %q, want outside.txt then ../escaped.txt", exit.Refusals)
	}
}

// conformConcurrent: a worker runs several attempts of one runtime at once;
// under -race this finds unsynchronised state.
func conformConcurrent(t *testing.T, c Case) {
	a := c.New(t)
	hc, _ := a.(adapter.HealthChecker)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 4 {
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
			_ = a.Capabilities()
			_ = adapter.Evaluate(a, "")
			r, err := start(t, t.Context(), c, a, adapter.Task{Input: adapter.Input{Prompt: c.Prompt}})
			if err != nil {
				errs <- fmt.Errorf("calling Start: %w", err)
				return
			}
			_ = r.h.Inspect()
			if _, _, e := r.wait(); e != nil {
				errs <- fmt.Errorf("task %d: %w%s", i, e, r.dump())
			} else if _, err := os.Stat(filepath.Join(r.in.Worktree, "hello.txt")); err != nil {
				errs <- fmt.Errorf("task %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
