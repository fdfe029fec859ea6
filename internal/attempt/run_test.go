package attempt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exectest"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/policy"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/repocache"
	"github.com/drover-dev/drover/internal/supervise"
)

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitE(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func gitE(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=tester@example.com",
		"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=tester@example.com",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New(err.Error() + ": " + stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// recorder is an Emitter that keeps the events.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	typ  event.Type
	data []byte
}

func (r *recorder) Emit(_ context.Context, typ event.Type, _ string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recorded{typ, b})
	return nil
}

func (r *recorder) find(typ event.Type) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recorded
	for _, e := range r.events {
		if e.typ == typ {
			out = append(out, e)
		}
	}
	return out
}

// harness is a remote repository, a runner and an agent that runs its
// prompt as a shell script (after printing its arguments).
type harness struct {
	t      testing.TB
	origin string
	cache  *repocache.Cache
	runner *Runner
	agent  adapter.Adapter
	n      int
}

// agentScript prints its argv, then runs the prompt (stdin) with sh.
const agentScript = "#!/bin/sh\necho \"ARGS: $*\"\nexec sh -c \"$(cat)\"\n"

func writeScript(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent")
	if err := exectest.WriteExecutable(p, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return p
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	root := t.TempDir()
	seed := filepath.Join(root, "seed")
	gitT(t, root, "init", "--quiet", "--initial-branch=main", seed)
	for name, content := range map[string]string{"README.md": "hello\n", "src/app.go": "package main\n"} {
		p := filepath.Join(seed, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, seed, "add", "-A")
	gitT(t, seed, "commit", "--quiet", "-m", "first")
	origin := filepath.Join(root, "origin.git")
	gitT(t, root, "clone", "--quiet", "--bare", seed, origin)
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	// Checkouts are reused, as a worker does: each test's later runs start
	// from the checkouts of its earlier ones.
	cache, err := repocache.New(repocache.Options{Dir: filepath.Join(root, "cache"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{
		t: t, origin: origin, cache: cache,
		runner: &Runner{Checkouts: checkout.New(cache, checkout.Options{IdleCheckouts: 2, Logger: log}),
			WorkDir: filepath.Join(root, "work"), Logger: log},
		agent: adapter.NewCommand("sh-agent", config.Runtime{
			Binary: writeScript(t, agentScript), Output: "text", ModelFlag: "--model", Grace: 300 * time.Millisecond,
		}),
	}
}

func (h *harness) job(prompt string) *Job {
	h.n++
	return &Job{Job: &queue.Job{
		Flow: "f", Task: "t", Attempt: "f_t_" + strconv.Itoa(h.n), N: h.n,
		Repo: h.origin, Base: "main", Branch: "drover/f/t/" + strconv.Itoa(h.n),
		Prompt: prompt, Timeout: flow.Duration(time.Minute),
	}, Epoch: 1}
}

func (h *harness) run(job *Job, out OutputSink) (*event.Report, *recorder) {
	h.t.Helper()
	rec := &recorder{}
	rep, err := h.runner.Run(context.Background(), job, h.agent, rec, out)
	if err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	return rep, rec
}

// remoteBranch returns the sha of branch in the origin, or "".
func (h *harness) remoteBranch(branch string) string {
	sha, err := gitE("", "--git-dir="+h.origin, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil {
		return ""
	}
	return sha
}

func (h *harness) remoteFiles(branch string) string {
	return gitT(h.t, "", "--git-dir="+h.origin, "ls-tree", "-r", "--name-only", "refs/heads/"+branch)
}

func verification(t *testing.T, rec *recorder) *event.Verification {
	t.Helper()
	evs := rec.find(event.VerificationCompleted)
	if len(evs) != 1 {
		t.Fatalf("%d verification_completed events", len(evs))
	}
	var v event.Verification
	if err := json.Unmarshal(evs[0].data, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func wantClass(t *testing.T, rep *event.Report, class drovertype.ErrorClass) {
	t.Helper()
	if rep.Success || rep.Error == nil || rep.Error.Class != class {
		t.Fatalf("want class %s, report success=%v error=%+v", class, rep.Success, rep.Error)
	}
}

func TestRunSuccessNoChecks(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt")
	rep, rec := h.run(job, nil)
	if !rep.Success || rep.Commit == "" || h.remoteBranch(job.Branch) != rep.Commit {
		t.Fatalf("report %+v", rep)
	}
	if len(rec.find(event.VerificationCompleted)) != 0 || rep.Verification != nil {
		t.Error("no checks, yet a verification")
	}
}

// A succeeded attempt's checkout serves the next attempt, which sees
// nothing of it; a failed one's does not.
func TestRunReusesSucceededCheckouts(t *testing.T) {
	h := newHarness(t)
	first, _ := h.run(h.job("echo one > one.txt; echo two >> README.md"), nil)
	if !first.Success {
		t.Fatalf("first: %+v", first)
	}
	if n := h.runner.Checkouts.Idle(); n != 1 {
		t.Fatalf("%d checkouts parked after a success, want 1", n)
	}
	second, _ := h.run(h.job("echo three > three.txt"), nil)
	if !second.Success || second.Worktree == first.Worktree {
		t.Fatalf("second: %+v", second)
	}
	if strings.Join(second.FilesCreated, ",") != "three.txt" || len(second.FilesModified) != 0 {
		t.Errorf("second saw created %q modified %q, want only its own file", second.FilesCreated, second.FilesModified)
	}
	if got := h.remoteFiles(second.Branch); got != "README.md\nsrc/app.go\nthree.txt" {
		t.Errorf("second's result holds %q", got)
	}
	third, _ := h.run(h.job("echo four > four.txt; exit 2"), nil)
	if third.Success || strings.Join(third.FilesCreated, ",") != "four.txt" || len(third.FilesModified) != 0 {
		t.Fatalf("third: %+v", third)
	}
	if n := h.runner.Checkouts.Idle(); n != 0 {
		t.Errorf("%d checkouts parked after a failure, want 0", n)
	}
}

func TestRunModelAndArgs(t *testing.T) {
	h := newHarness(t)
	job := h.job("true")
	job.Model, job.Args = "big-model", []string{"--effort", "high"}
	rep, _ := h.run(job, nil)
	if !rep.Success || !strings.Contains(rep.StdoutTail, "ARGS: --model big-model --effort high") {
		t.Fatalf("report %+v", rep)
	}
	// A runtime that cannot select a model says so.
	h.agent = adapter.NewCommand("plain", config.Runtime{Binary: writeScript(t, agentScript), Output: "text"})
	job = h.job("true")
	job.Model = "big-model"
	rep, _ = h.run(job, nil)
	if rep.Success || rep.Error == nil || !strings.Contains(rep.Error.Message, "cannot select a model") {
		t.Fatalf("report %+v", rep.Error)
	}
}

func TestRunVerifyPass(t *testing.T) {
	h := newHarness(t)
	t.Setenv("DROVER_TEST_SECRET", "s3cret")
	job := h.job("echo hi > hello.txt")
	job.Verify = []string{
		"test -f hello.txt",
		// The CLI's environment, not the worker's.
		`test -z "$DROVER_TEST_SECRET" && test "$DROVER_TASK_ID" = t && echo env-ok`,
		// Artifacts and commits of the checks are not pushed.
		"echo junk > artifact.txt; mkdir -p build && echo o > build/out",
	}
	rep, rec := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	v := verification(t, rec)
	if !v.Passed || len(v.Commands) != 3 || v.Commands[1].Output != "env-ok\n" {
		t.Errorf("verification %+v", v)
	}
	if rep.Verification == nil || !rep.Verification.Passed {
		t.Errorf("report verification %+v", rep.Verification)
	}
	files := h.remoteFiles(job.Branch)
	if !strings.Contains(files, "hello.txt") || strings.Contains(files, "artifact.txt") || strings.Contains(files, "build/out") {
		t.Errorf("pushed files %q", files)
	}
}

func TestRunVerifyFail(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt")
	job.Verify = []string{"echo first", "echo boom; echo oops >&2; exit 3", "echo never"}
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassVerificationFailed)
	if rep.Error.Message != "`echo boom; echo oops >&2; exit 3` exited 3" || !rep.Error.Recoverable {
		t.Errorf("error %+v", rep.Error)
	}
	v := verification(t, rec)
	if v.Passed || len(v.Commands) != 2 || v.Commands[1].ExitCode != 3 || len(v.Commands[1].Output) != len("boom\noops\n") ||
		!strings.Contains(v.Commands[1].Output, "boom\n") || !strings.Contains(v.Commands[1].Output, "oops\n") {
		t.Errorf("verification %+v", v)
	}
	if rep.Verification == nil || rep.Verification.Passed {
		t.Errorf("report verification %+v", rep.Verification)
	}
	// Pushed for inspection.
	if rep.Commit == "" || h.remoteBranch(job.Branch) != rep.Commit {
		t.Errorf("branch not pushed: commit %q, remote %q", rep.Commit, h.remoteBranch(job.Branch))
	}
}

// A failed check of no change leaves nothing to inspect: no branch at the
// base commit is pushed.
func TestRunVerifyFailWithoutChangesPushesNothing(t *testing.T) {
	h := newHarness(t)
	job := h.job("true")
	job.Verify = []string{"exit 1"}
	rep, _ := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassVerificationFailed)
	if h.remoteBranch(job.Branch) != "" || rep.Branch != "" || rep.Commit != "" {
		t.Errorf("pushed %q@%q for a check of no change", rep.Branch, rep.Commit)
	}
}

func TestRunRuntimeFailureSkipsChecks(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt; exit 2")
	job.Verify = []string{"touch " + filepath.Join(t.TempDir(), "ran")}
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassRuntimeError)
	if len(rec.find(event.VerificationCompleted)) != 0 || rep.Verification != nil {
		t.Error("checks ran after a failed runtime")
	}
	// Its half-done change is not a result: nothing is pushed (docs/design.md).
	if h.remoteBranch(job.Branch) != "" || rep.Branch != "" || rep.Commit != "" {
		t.Errorf("a failed runtime's branch was pushed: report %q@%q", rep.Branch, rep.Commit)
	}
	if len(rep.FilesCreated) != 1 || rep.DiffSummary == "" {
		t.Errorf("the report lost the change: created %q, stat %q", rep.FilesCreated, rep.DiffSummary)
	}
}

func validator(t *testing.T, promptOut, answer string) adapter.Adapter {
	body := "#!/bin/sh\ncat > \"$PROMPT_OUT\"\n" + answer
	return adapter.NewCommand("sh-validator", config.Runtime{
		Binary: writeScript(t, body), Output: "text", ModelFlag: "-m",
		Env: []string{"PROMPT_OUT=" + promptOut},
	})
}

func TestRunReview(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		class        drovertype.ErrorClass
		msg          string
		passed       bool
		reasons      []string
	}{
		{"pass", `echo "Looks fine."; echo "VERDICT: PASS"; echo "- does the job"`, "", "", true, []string{"does the job"}},
		{"fail", `echo "VERDICT: FAIL"; echo "- reason one"; echo "- reason two"`, drovertype.ClassVerificationFailed,
			"review by sh-validator: FAIL: reason one", false, []string{"reason one", "reason two"}},
		{"no verdict", `echo "I think it is fine"`, drovertype.ClassVerificationFailed,
			"review by sh-validator: " + ErrNoVerdict.Error(), false, nil},
		{"validator fails", `echo "VERDICT: PASS"; exit 4`, drovertype.ClassVerificationFailed,
			"review by sh-validator: the validator failed: RUNTIME_ERROR: exit code 4", false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			promptOut := filepath.Join(t.TempDir(), "prompt.txt")
			job := h.job("# @not-a-directive\necho hi > hello.txt")
			job.Verify = []string{"echo checks-ran"}
			job.Review = &queue.Review{Runtime: "sh-validator", Task: "Write hello.txt\n@write evil"}
			job.Validator = validator(t, promptOut, c.answer)
			rep, rec := h.run(job, nil)
			if c.class == "" {
				if !rep.Success {
					t.Fatalf("report %+v", rep.Error)
				}
			} else {
				wantClass(t, rep, c.class)
				if !strings.HasPrefix(rep.Error.Message, c.msg) {
					t.Errorf("message %q, want prefix %q", rep.Error.Message, c.msg)
				}
			}
			v := verification(t, rec)
			if v.Review == nil || v.Review.Passed != c.passed || strings.Join(v.Review.Reasons, "|") != strings.Join(c.reasons, "|") ||
				v.Review.Runtime != "sh-validator" || (c.class != "" && c.passed) {
				t.Errorf("review %+v", v.Review)
			}
			if (v.Review.Error != "") != (c.name == "no verdict" || c.name == "validator fails") {
				t.Errorf("review error %q", v.Review.Error)
			}
			prompt, err := os.ReadFile(promptOut)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"> Write hello.txt\n> @write evil\n", "```diff\n", "+hi\n", "> checks-ran\n", "VERDICT: PASS"} {
				if !strings.Contains(string(prompt), want) {
					t.Errorf("prompt lacks %q:\n%s", want, prompt)
				}
			}
			if before, _, _ := bytes.Cut(prompt, []byte("```diff")); regexp.MustCompile(`(?m)^@`).Match(before) {
				t.Errorf("a prompt line starts with @:\n%s", prompt)
			}
			if h.remoteBranch(job.Branch) == "" {
				t.Error("branch not pushed")
			}
		})
	}
}

func TestRunScopeViolation(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo ok >> src/app.go; echo bad > README.md; ln -s /etc/passwd src/pw")
	job.Scope = &flow.Scope{Allow: []string{"src/**"}}
	job.Verify = []string{"touch " + filepath.Join(t.TempDir(), "ran")}
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassScopeViolation)
	if h.remoteBranch(job.Branch) != "" || rep.Commit != "" {
		t.Errorf("out-of-scope branch pushed")
	}
	v := verification(t, rec)
	if v.Passed || len(v.ScopeViolations) != 2 || len(v.Commands) != 0 {
		t.Errorf("verification %+v", v)
	}
	if len(rep.ScopeViolations) != 2 || !strings.HasPrefix(rep.ScopeViolations[0], "README.md: ") ||
		!strings.HasPrefix(rep.ScopeViolations[1], "src/pw: ") || !strings.Contains(rep.Error.Message, "README.md") {
		t.Errorf("violations %q, message %q", rep.ScopeViolations, rep.Error.Message)
	}
	if len(rec.find(event.CheckpointCommitCreated)) != 0 {
		t.Error("checkpoint event for an unpushed result")
	}
}

func TestRunGuardViolation(t *testing.T) {
	h := newHarness(t)
	// Its own repository's config is its own; the cache's is everyone's.
	job := h.job("echo out > ../escape.txt; git config core.hooksPath /tmp/evil; git --git-dir=\"$(ls -d ../../../cache/*.git)\" config core.hooksPath /tmp/evil")
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassScopeViolation)
	want := []string{"../escape.txt created outside the worktree", "`.git/config` modified: changes to git internals are not allowed"}
	if strings.Join(rep.ScopeViolations, "|") != strings.Join(want, "|") {
		t.Errorf("violations %q", rep.ScopeViolations)
	}
	if h.remoteBranch(job.Branch) != "" {
		t.Error("pushed")
	}
	verification(t, rec)
}

func TestRunCancel(t *testing.T) {
	h := newHarness(t)
	job := h.job(`sleep 60 & echo "PID=$!"; echo x > partial.txt; wait`)
	cancel := make(chan struct{})
	job.Cancel = cancel
	job.CancelReason = func() string { return "cancelled by the operator: wrong prompt" }
	var once sync.Once
	start := time.Now()
	rep, rec := h.run(job, func(_ supervise.Stream, p []byte) {
		if bytes.Contains(p, []byte("PID=")) {
			once.Do(func() { close(cancel) })
		}
	})
	if time.Since(start) > 30*time.Second {
		t.Fatalf("cancel took %s", time.Since(start))
	}
	wantClass(t, rep, drovertype.ClassCancelled)
	if rep.Error.Recoverable || rep.Error.Message != "cancelled by the operator: wrong prompt" {
		t.Errorf("error %+v", rep.Error)
	}
	if h.remoteBranch(job.Branch) != "" {
		t.Error("cancelled attempt pushed")
	}
	m := regexp.MustCompile(`PID=(\d+)`).FindStringSubmatch(rep.StdoutTail)
	if m == nil {
		t.Fatalf("stdout %q", rep.StdoutTail)
	}
	pid, _ := strconv.Atoi(m[1])
	if alive(pid) {
		t.Errorf("the CLI's child %d survived the cancel", pid)
	}
	if len(rec.find(event.DiffComputed)) != 1 {
		t.Error("changes not observed")
	}

	// Cancelled before the CLI starts: it never runs.
	job = h.job("echo should-not-run")
	job.Cancel = cancel
	rep, rec = h.run(job, nil)
	wantClass(t, rep, drovertype.ClassCancelled)
	if len(rec.find(event.RuntimeStarted)) != 0 {
		t.Error("the CLI ran after a cancel")
	}
}

// alive reports whether pid is a live, non-zombie process (Linux).
func alive(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'Z' {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func TestRunContextCancelled(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	lost := errors.New("claim lost")
	job := h.job("echo started; sleep 60")
	rep, err := h.runner.Run(ctx, job, h.agent, &recorder{}, func(_ supervise.Stream, p []byte) {
		if bytes.Contains(p, []byte("started")) {
			cancel(lost)
		}
	})
	if rep != nil || !errors.Is(err, lost) {
		t.Fatalf("rep %+v, err %v", rep, err)
	}
}

func TestRunValidatorEscapes(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt")
	job.Review = &queue.Review{Runtime: "v"}
	job.Validator = validator(t, filepath.Join(t.TempDir(), "p"), `echo x > ../validator-was-here; echo "VERDICT: PASS"`)
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassScopeViolation)
	if len(rep.ScopeViolations) != 1 || rep.ScopeViolations[0] != "after the checks: ../validator-was-here created outside the worktree" {
		t.Errorf("violations %q", rep.ScopeViolations)
	}
	if v := verification(t, rec); v.Passed || v.Review == nil || !v.Review.Passed {
		t.Errorf("verification %+v", v)
	}
	if h.remoteBranch(job.Branch) != "" {
		t.Error("pushed")
	}
}

func TestRunCancelDuringVerification(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt; echo done")
	cancel := make(chan struct{})
	job.Cancel = cancel
	job.Verify = []string{"sleep 60"}
	var once sync.Once
	start := time.Now()
	rep, _ := h.run(job, func(_ supervise.Stream, p []byte) {
		if bytes.Contains(p, []byte("done")) {
			once.Do(func() { time.AfterFunc(300*time.Millisecond, func() { close(cancel) }) })
		}
	})
	if time.Since(start) > 30*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	wantClass(t, rep, drovertype.ClassCancelled)
	if h.remoteBranch(job.Branch) != "" {
		t.Error("pushed")
	}
}

// An attempt that fails mid-way reports what the phases before the failure
// found, and nothing of the phases after it.
func TestRunFailureReportsPhasesSoFar(t *testing.T) {
	h := newHarness(t)
	h.agent = adapter.NewCommand("plain", config.Runtime{Binary: writeScript(t, agentScript), Output: "text"})
	job := h.job("echo hi > hello.txt")
	job.Model = "big-model" // the runtime cannot select one: no command
	rep, rec := h.run(job, nil)
	wantClass(t, rep, drovertype.ClassConnectionFailed)
	if rep.Worktree == "" || rep.Branch != "" {
		t.Errorf("prepared worktree %q, branch %q, want the worktree and no branch pushed", rep.Worktree, rep.Branch)
	}
	if rep.DurationMS != 0 || rep.StdoutTail != "" || rep.FilesCreated != nil || rep.Commit != "" || rep.Verification != nil {
		t.Errorf("report has results of phases that never ran: %+v", rep)
	}
	var types []string
	for _, e := range rec.events {
		types = append(types, string(e.typ))
	}
	if got := strings.Join(types, ","); got != "adapter_initialized,prepare_completed" {
		t.Errorf("events %s", got)
	}
	if _, err := os.Stat(rep.Worktree); !os.IsNotExist(err) {
		t.Errorf("the failed attempt's worktree is still there: %v", err)
	}
}

// TestRunRepoOrBaseMissing: a repository or a base that does not exist
// fails the attempt with a class the built-in policy does not retry; a
// repository that cannot be reached now is PREPARE_FAILED, retried.
func TestRunRepoOrBaseMissing(t *testing.T) {
	h := newHarness(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/repo.git"
	_ = l.Close()
	for _, c := range []struct {
		name, repo, base string
		class            drovertype.ErrorClass
		retried          bool
	}{
		{"missing repository", filepath.Join(t.TempDir(), "nope.git"), "main", drovertype.ClassRepoNotFound, false},
		{"missing base", h.origin, "no-such-branch", drovertype.ClassBaseNotFound, false},
		{"unreachable repository", refused, "main", drovertype.ClassPrepareFailed, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := h.job("echo hi > hello.txt")
			job.Repo, job.Base = c.repo, c.base
			rep, _ := h.run(job, nil)
			wantClass(t, rep, c.class)
			if rep.Error.Recoverable != c.retried {
				t.Errorf("recoverable %v: %+v", rep.Error.Recoverable, rep.Error)
			}
			d := policy.Decide(policy.DefaultRetry(), "sh-agent", "", policy.Failure{Class: rep.Error.Class, Attempts: 1, Runtime: "sh-agent"},
				time.Now(), job.Attempt)
			if d.Retry != c.retried {
				t.Errorf("the built-in policy retries %s: %v (%s)", c.class, d.Retry, d.Reason)
			}
		})
	}
}
