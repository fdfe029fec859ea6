package attempt

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/nativetest"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/supervise"
)

// sandboxed is a harness whose runner confines what it starts, as a
// worker with the sandbox on does; it skips where the kernel cannot.
func sandboxed(t *testing.T) *harness {
	t.Helper()
	sb, err := sandbox.New(sandbox.Probe())
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	h := newHarness(t)
	h.runner.Sandbox = sb
	root := filepath.Dir(h.runner.WorkDir)
	h.runner.SandboxDeny = []string{h.runner.WorkDir, filepath.Join(root, "cache")}
	// A HOME of its own per attempt, as a confined runtime has by default.
	h.agent = adapter.NewCommand("sh-agent", config.Runtime{
		Binary: writeScript(t, agentScript), Output: "text", Home: "isolated", Grace: 300 * time.Millisecond,
	})
	return h
}

func cacheRepo(t *testing.T, h *harness) string {
	t.Helper()
	d, err := h.cache.RepoDir(h.origin)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRunSandboxed: the CLI writes its worktree, commits in its own
// repository and uses its TMPDIR and HOME; every write outside them fails,
// the report says what was denied, and the next attempt runs as usual.
func TestRunSandboxed(t *testing.T) {
	h := sandboxed(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	cache := cacheRepo(t, h)
	job := h.job(strings.Join([]string{
		"echo ok > mine.txt && git add mine.txt && git commit -q -m mine",
		"echo tmp > \"$TMPDIR/t\" && echo home > \"$HOME/h\" && echo wrote-own",
		"echo x > ../escape.txt",
		"echo x > ../../escape.txt",
		"echo x > " + outside,
		"git --git-dir=" + cache + " config core.hooksPath /tmp/evil",
		"echo '#!/bin/sh' > " + cache + "/hooks-planted",
		"true",
	}, "\n"))
	rep, rec := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	if !strings.HasPrefix(rep.Sandbox, "landlock ABI ") {
		t.Errorf("report sandbox %q", rep.Sandbox)
	}
	if !strings.Contains(rep.StdoutTail, "wrote-own") || len(rep.CommitsCreated) != 1 || !strings.Contains(h.remoteFiles(job.Branch), "mine.txt") {
		t.Errorf("the CLI's own writes: stdout %q commits %v files %q", rep.StdoutTail, rep.CommitsCreated, h.remoteFiles(job.Branch))
	}
	for _, p := range []string{filepath.Join(h.runner.WorkDir, "worktrees", "escape.txt"), filepath.Join(h.runner.WorkDir, "escape.txt"), outside,
		filepath.Join(cacheRepo(t, h), "hooks-planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cacheRepo(t, h), "config")); strings.Contains(string(b), "hooksPath") {
		t.Errorf("the cache's config changed:\n%s", b)
	}
	var denied []string
	for _, d := range rep.SandboxDenied {
		denied = append(denied, strings.SplitN(d, ": ", 2)[0])
	}
	// (git, denied even reading the cache, says "not a git repository":
	// nothing there names the denial.)
	for _, want := range []string{filepath.Join(h.runner.WorkDir, "worktrees", "escape.txt"), filepath.Join(h.runner.WorkDir, "escape.txt"), outside,
		filepath.Join(cache, "hooks-planted")} {
		if !slices.Contains(denied, want) {
			t.Errorf("denials %q lack %s", rep.SandboxDenied, want)
		}
	}
	var exited event.RuntimeExitedData
	rec.decode(t, event.RuntimeExited, &exited)
	if !slices.Equal(exited.Denied, rep.SandboxDenied) {
		t.Errorf("runtime_exited denied %q, report %q", exited.Denied, rep.SandboxDenied)
	}

	// The verification commands run confined too.
	job = h.job("echo fine > ok.txt")
	verifyEscape := filepath.Join(t.TempDir(), "verify-escape.txt")
	job.Verify = []string{"echo x > " + verifyEscape}
	rep, _ = h.run(job, nil)
	wantClass(t, rep, drovertype.ClassVerificationFailed)
	if _, err := os.Stat(verifyEscape); err == nil {
		t.Error("a verification command wrote outside")
	}

	// And the next attempt is unaffected.
	rep, _ = h.run(h.job("echo again > again.txt"), nil)
	if !rep.Success || len(rep.SandboxDenied) != 0 {
		t.Errorf("next attempt: %+v %q", rep.Error, rep.SandboxDenied)
	}
}

func TestRunSandboxOffSaysSo(t *testing.T) {
	h := newHarness(t)
	h.runner.SandboxOff = "off: worker.sandbox is off"
	rep, rec := h.run(h.job("echo x > a.txt"), nil)
	if rep.Sandbox != "off: worker.sandbox is off" || len(rep.SandboxDenied) != 0 {
		t.Errorf("report sandbox %q denied %q", rep.Sandbox, rep.SandboxDenied)
	}
	var started event.RuntimeStartedData
	rec.decode(t, event.RuntimeStarted, &started)
	if started.Sandbox != rep.Sandbox {
		t.Errorf("runtime_started sandbox %q", started.Sandbox)
	}
}

// decode reads the one event of a type the run emitted.
func (r *recorder) decode(t *testing.T, typ event.Type, into any) {
	t.Helper()
	evs := r.find(typ)
	if len(evs) != 1 {
		t.Fatalf("%d %s events", len(evs), typ)
	}
	if err := json.Unmarshal(evs[0].data, into); err != nil {
		t.Fatal(err)
	}
}

// TestWrapConfinesACommand: Wrap, the seam of an in-process runtime's
// commands, starts them confined and reads their output for denials; a
// nil *confined leaves the spec alone.
func TestWrapConfinesACommand(t *testing.T) {
	var none *confined
	spec := supervise.Spec{Path: "/bin/sh"}
	if err := none.Wrap(&spec); err != nil || spec.Launch != nil || spec.OnOutput != nil {
		t.Fatalf("nil Wrap changed the spec: %v %+v", err, spec)
	}
	sb, err := sandbox.New(sandbox.Probe())
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "outside")
	c, err := sb.Compile(sandbox.Policy{Own: []sandbox.Grant{{Path: dir, Write: true}}, Exec: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	x := &confined{c: c, den: c.Denials(dir)}
	var seen strings.Builder
	spec = supervise.Spec{Path: "/bin/sh", Args: []string{"-c", "echo in > in; echo out > " + outside + "; exit 3"}, Dir: dir,
		Timeout: time.Minute, OnOutput: func(_ supervise.Stream, p []byte) { seen.Write(p) }}
	if err := x.Wrap(&spec); err != nil {
		t.Fatal(err)
	}
	res, err := supervise.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit %d, want the command's own 3", res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "in")); err != nil {
		t.Errorf("the command could not write its own dir: %v", err)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("the command wrote outside: %v", err)
	}
	if d := x.denied(); len(d) != 1 || !strings.HasPrefix(d[0], outside+": ") {
		t.Errorf("denied %q, want %s named", d, outside)
	}
	if !strings.Contains(seen.String(), "Permission denied") {
		t.Errorf("the output no longer reaches the spec's own OnOutput: %q", seen.String())
	}
}

// stuckHarness is a sandboxed harness whose agent may retry on its own
// for a second, and a listening loopback port the sandbox refuses it.
func stuckHarness(t *testing.T) (*harness, string) {
	t.Helper()
	h := sandboxed(t)
	h.agent = adapter.NewCommand("sh-agent", config.Runtime{
		Binary: writeScript(t, agentScript), Output: "text", Home: "isolated", Grace: 300 * time.Millisecond,
		OwnRetryTimeout: time.Second,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return h, port
}

// TestRunStuckOnDenial: a CLI that keeps connecting to a port its sandbox
// refuses, and does nothing else, is stopped once it has done so for
// own_retry_timeout, class SANDBOX_DENIED, the report naming the port and
// what lets it through; one that fails on its own right after a refusal
// is SANDBOX_DENIED too.
func TestRunStuckOnDenial(t *testing.T) {
	h, port := stuckHarness(t)
	probe := "bash -c 'echo > /dev/tcp/127.0.0.1/" + port + "'"
	rep, rec := h.run(h.job("while :; do "+probe+"; sleep 0.2; done"), nil)
	wantClass(t, rep, drovertype.ClassSandboxDenied)
	if !strings.Contains(rep.Error.Message, "connect to 127.0.0.1:"+port+" refused by the sandbox: add the port to runtimes.sh-agent.sandbox.connect") ||
		!strings.Contains(rep.Error.Message, "then Drover stopped the CLI") || rep.Error.Category != drovertype.CategoryInfrastructure {
		t.Errorf("error %+v", rep.Error)
	}
	if len(rep.SandboxDenied) != 1 || !strings.HasPrefix(rep.SandboxDenied[0], "tcp/"+port+": ") || !strings.Contains(rep.SandboxDenied[0], "times)") {
		t.Errorf("denied %q", rep.SandboxDenied)
	}
	var exited event.RuntimeExitedData
	rec.decode(t, event.RuntimeExited, &exited)
	if exited.Outcome != "stopped" {
		t.Errorf("runtime_exited outcome %q, want stopped by Drover", exited.Outcome)
	}

	// Refused, then given up at once: the refusal is why. (Past settle
	// after the script's first line, its ARGS: a refusal read within it of
	// progress might have been printed before it.)
	rep, _ = h.run(h.job("sleep 1.2\n"+probe+"\nexit 1"), nil)
	wantClass(t, rep, drovertype.ClassSandboxDenied)
	if !strings.Contains(rep.Error.Message, "and then the CLI failed: RUNTIME_ERROR: exit code 1") {
		t.Errorf("error %+v", rep.Error)
	}
}

// TestRunDeniedAndMovesOn: a CLI refused once, or now and then with work
// in between, is never stopped: it succeeds, and the report names what it
// was refused. One that recovered before it failed fails by its own class.
func TestRunDeniedAndMovesOn(t *testing.T) {
	h, port := stuckHarness(t)
	probe := "bash -c 'echo > /dev/tcp/127.0.0.1/" + port + "'"
	script := strings.Join([]string{probe, "sleep 1.5", "echo working", probe, "sleep 1.5", "echo still working", probe, "echo done > done.txt"}, "\n")
	rep, _ := h.run(h.job(script), nil)
	if !rep.Success {
		t.Fatalf("a CLI that went on working was stopped: %+v", rep.Error)
	}
	if len(rep.SandboxDenied) != 1 || !strings.Contains(rep.SandboxDenied[0], "(refused 3 times)") {
		t.Errorf("denied %q", rep.SandboxDenied)
	}
	// A file written counts as work, with nothing printed.
	script = strings.Join([]string{probe, "sleep 0.6", "echo x > progress.txt", "sleep 0.6", probe, "sleep 2", "echo y > progress.txt"}, "\n")
	if rep, _ := h.run(h.job(script), nil); !rep.Success {
		t.Errorf("a CLI that wrote files was stopped: %+v", rep.Error)
	}
	// One that did something after its refusal failed of something else,
	// and so did one whose refusal came with something done, too close to
	// tell which came first.
	rep, _ = h.run(h.job("sleep 1.2\n"+probe+"\nsleep 1.2\necho recovered\nexit 1"), nil)
	wantClass(t, rep, drovertype.ClassRuntimeError)
	rep, _ = h.run(h.job(probe+"\necho recovered\nexit 1"), nil)
	wantClass(t, rep, drovertype.ClassRuntimeError)
}

// TestRunNativeValidatorSandboxed: a native validator's commands run
// confined, as a CLI validator is: the one that writes beyond the worktree
// is refused, and the review still reads the verdict.
func TestRunNativeValidatorSandboxed(t *testing.T) {
	h := sandboxed(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	job := h.job("echo hi > hello.txt")
	vmock := nativetest.NewMock(
		nativetest.Calls(u, nativetest.Call("b", "bash", map[string]any{"command": "echo x > " + outside})),
		nativetest.Text("It is right.\nVERDICT: PASS\n- hello.txt holds hi", u),
	)
	job.Review = &queue.Review{Runtime: "native-validator"}
	job.Validator = native.AdapterOf(native.NewRuntime("native-validator", native.Config{Provider: "mock", Model: "m"}, vmock))
	rep, rec := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	if v := verification(t, rec); v.Review == nil || !v.Review.Passed {
		t.Errorf("review %+v", v.Review)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("the validator's command wrote %s: %v", outside, err)
	}
	reqs := vmock.Requests()
	if res := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].ToolResults; len(res) != 1 || !res[0].IsError {
		t.Errorf("the validator's command result %+v, want its failure", res)
	}
}

// unconfinedAgent is a runtime that starts its task without asking for its
// sandbox, as Start must.
type unconfinedAgent struct{ *adapter.CommandAdapter }

func (u unconfinedAgent) Start(ctx context.Context, t *adapter.Task) (adapter.Handle, error) {
	t2 := *t
	t2.Confine = nil
	return u.CommandAdapter.Start(ctx, &t2)
}

// TestRunUnconfinedRuntimeStopped: a runtime that starts its task without
// asking for its sandbox may be running with the worker's access: the task
// is stopped at once and the attempt fails, as does a review by such a
// validator.
func TestRunUnconfinedRuntimeStopped(t *testing.T) {
	h := sandboxed(t)
	cmd := h.agent.(*adapter.CommandAdapter)
	h.agent = unconfinedAgent{cmd}
	job := h.job("sleep 30; echo hi > hello.txt")
	start := time.Now()
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassPrepareFailed)
	if !strings.Contains(rep.Error.Message, "without asking for its sandbox") || time.Since(start) > 20*time.Second {
		t.Errorf("error %+v after %s", rep.Error, time.Since(start))
	}
	if len(rec.find(event.RuntimeStarted)) != 0 {
		t.Error("runtime_started for a task that was stopped")
	}

	h.agent = cmd
	job = h.job("echo hi > hello.txt")
	job.Review = &queue.Review{Runtime: "sh-validator"}
	job.Validator = unconfinedAgent{validator(t, filepath.Join(t.TempDir(), "prompt.txt"), `echo "VERDICT: PASS"`).(*adapter.CommandAdapter)}
	rep, rec = h.run(job, nil)
	wantClass(t, rep, drovertype.ClassVerificationFailed)
	if v := verification(t, rec); v.Review == nil || !strings.Contains(v.Review.Error, "without asking for its sandbox") {
		t.Errorf("review %+v", v.Review)
	}
}
