//go:build linux

package supervise

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/sandbox"
)

// helperEnv makes the test binary act as a helper process instead of
// running tests (the os.Args[0] re-exec trick), for what a shell cannot do.
const helperEnv = "SUPERVISE_TEST_HELPER"

// sandboxEnv makes every test start its processes confined, through the
// sandbox's re-exec step: TestMain runs the whole suite a second time so,
// to show supervision (process group, parent-death signal, timeouts,
// output, limits, exit codes) works the same through the step.
const sandboxEnv = "SUPERVISE_TEST_SANDBOX"

// testLaunch confines what the tests start, in the second run.
var testLaunch func(Exec) (Exec, error)

func withLaunch(s Spec) Spec {
	if s.Launch == nil {
		s.Launch = testLaunch
	}
	return s
}

func TestMain(m *testing.M) {
	if os.Getenv(sandboxEnv) != "" {
		testLaunch = mustConfine()
	}
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if code == 0 && os.Getenv(sandboxEnv) == "" {
		code = runConfined()
	}
	os.Exit(code)
}

// mustConfine is a launcher for the tests' processes: the system paths,
// the temp dir (where tests write) and what they run from PATH.
func mustConfine() func(Exec) (Exec, error) {
	sb, err := sandbox.New(sandbox.Probe())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := sb.Compile(sandbox.Policy{Extra: []sandbox.Grant{{Path: os.TempDir(), Write: true}}, PATH: []string{"/usr/bin", "/bin"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return func(e Exec) (Exec, error) {
		path, argv, ruleset, err := c.Wrap(e.Path, e.Argv)
		if err != nil {
			return Exec{}, err
		}
		return Exec{Path: path, Argv: argv, Files: append(e.Files, ruleset)}, nil
	}
}

// runConfined runs this test binary again, with the same flags, in
// sandbox mode; where the kernel cannot confine it says so and passes.
func runConfined() int {
	if err := sandbox.Probe().Usable(); err != nil {
		fmt.Println("supervise: not run again confined:", err)
		return 0
	}
	var args []string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.testlogfile") {
			args = append(args, a)
		}
	}
	fmt.Println("supervise: every test again, each process started confined (" + sandboxEnv + "=1)")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), sandboxEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "supervise: confined run:", err)
		return 1
	}
	return 0
}

func runHelper(name string) int {
	switch name {
	case "pdeathsig":
		// Start a long child, report its pid, then block until the test
		// SIGKILLs us: the child must die with us.
		p, err := Start(context.Background(), withLaunch(Spec{Path: os.Getenv("SUPERVISE_SLEEP"), Args: []string{"1000"}}))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p.Pid())
		p.Wait()
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

var testEnv = []string{"PATH=/usr/bin:/bin"}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not available: %v", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func shSpec(t *testing.T, script string) Spec {
	return Spec{Path: lookPath(t, "sh"), Args: []string{"-c", script}, Env: testEnv}
}

func run(t *testing.T, spec Spec) *Result {
	t.Helper()
	res, err := Run(context.Background(), withLaunch(spec))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// signalOn returns an OnOutput that closes the returned channel the first
// time marker appears on the given stream (chunks are accumulated, so a
// marker split across reads is still found).
func signalOn(stream Stream, marker string) (func(Stream, []byte), <-chan struct{}) {
	ch := make(chan struct{})
	var seen bytes.Buffer
	var once sync.Once
	return func(s Stream, p []byte) {
		if s != stream {
			return
		}
		seen.Write(p)
		if bytes.Contains(seen.Bytes(), []byte(marker)) {
			once.Do(func() { close(ch) })
		}
	}, ch
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// gone reports whether pid no longer runs. A killed process whose parent is
// gone may linger as a zombie if PID 1 does not reap (common in containers);
// a zombie runs nothing, so it counts as gone.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// The state follows the parenthesised command name, which may hold spaces.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func firstInt(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(strings.TrimSpace(s), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("no pid in %q: %v", s, err)
	}
	return n
}

func TestExitCodePropagates(t *testing.T) {
	t.Parallel()
	res := run(t, shSpec(t, "echo out; echo err >&2; exit 7"))
	if res.Outcome != Exited || res.ExitCode != 7 || res.Signal != "" || res.StopCause != nil || res.Killed {
		t.Fatalf("result = %+v, want exited with code 7", res)
	}
	if res.Stdout.String() != "out\n" || res.Stderr.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", res.Stdout.String(), res.Stderr.String())
	}
	if res.Duration() <= 0 || res.Started.IsZero() {
		t.Errorf("duration %v, started %v", res.Duration(), res.Started)
	}
}

func TestKilledBySomeoneElseIsSignaled(t *testing.T) {
	t.Parallel()
	res := run(t, shSpec(t, "kill -KILL $$"))
	if res.Outcome != Signaled || res.ExitCode != -1 || res.Signal != "killed" || res.StopCause != nil {
		t.Fatalf("result = %+v, want signaled/killed", res)
	}
}

func TestEnvIsExactlySpecEnv(t *testing.T) {
	t.Setenv("SUPERVISE_PARENT_ONLY", "leaked")
	env := lookPath(t, "env")
	res := run(t, Spec{Path: env, Env: []string{"A=1", "B=two words"}})
	if got, want := res.Stdout.String(), "A=1\nB=two words\n"; got != want {
		t.Errorf("env printed %q, want %q", got, want)
	}
	// nil is an empty environment, never "inherit".
	res = run(t, Spec{Path: env, Dir: t.TempDir()})
	if got := res.Stdout.String(); got != "" {
		t.Errorf("nil Env: env printed %q, want nothing", got)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	cat := lookPath(t, "cat")
	t.Run("reader", func(t *testing.T) {
		t.Parallel()
		res := run(t, Spec{Path: cat, Stdin: strings.NewReader("hello\nworld\n")})
		if got := res.Stdout.String(); got != "hello\nworld\n" {
			t.Errorf("stdout %q", got)
		}
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		name := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(name, []byte("from a file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		res := run(t, Spec{Path: cat, Stdin: f})
		if got := res.Stdout.String(); got != "from a file\n" {
			t.Errorf("stdout %q", got)
		}
		// The caller's file is the caller's: still open.
		if _, err := f.Stat(); err != nil {
			t.Errorf("stdin file closed by Start: %v", err)
		}
	})
	t.Run("nil is /dev/null", func(t *testing.T) {
		t.Parallel()
		var typedNil *os.File
		for _, in := range []io.Reader{nil, typedNil} {
			res := run(t, Spec{Path: cat, Stdin: in})
			if res.Outcome != Exited || res.ExitCode != 0 || res.Stdout.Total != 0 || res.Stderr.Total != 0 {
				t.Errorf("stdin %#v: result %+v", in, res)
			}
		}
	})
	t.Run("unread large stdin does not block", func(t *testing.T) {
		t.Parallel()
		spec := shSpec(t, "exit 0")
		spec.Stdin = bytes.NewReader(make([]byte, 4<<20))
		if res := run(t, spec); res.Outcome != Exited {
			t.Errorf("result %+v", res)
		}
	})
}

func TestWallClockTimeout(t *testing.T) {
	t.Parallel()
	res := run(t, Spec{Path: lookPath(t, "sleep"), Args: []string{"1000"}, Timeout: 200 * time.Millisecond})
	if res.Outcome != TimedOut || !errors.Is(res.StopCause, ErrTimeout) || res.Signal != "terminated" || res.Killed {
		t.Fatalf("result = %+v, want timed out by SIGTERM", res)
	}
	if d := res.Duration(); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("duration %v", d)
	}
}

func TestGracefulStop(t *testing.T) {
	t.Parallel()
	spec := shSpec(t, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	var ready <-chan struct{}
	spec.OnOutput, ready = signalOn(Stdout, "ready")
	p, err := Start(context.Background(), withLaunch(spec))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ready, "ready")
	p.Stop(nil)
	res := p.Wait()
	if res.Outcome != Stopped || !errors.Is(res.StopCause, ErrStopped) || res.ExitCode != 0 || res.Signal != "" || res.Killed {
		t.Fatalf("result = %+v, want a clean exit 0 after SIGTERM", res)
	}
	if got := res.Stdout.String(); got != "ready\nbye\n" {
		t.Errorf("stdout %q", got)
	}
}

func TestIgnoredSIGTERMIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	spec := shSpec(t, `trap '' TERM; echo ready; sleep 1000`)
	spec.Grace = grace
	var ready <-chan struct{}
	spec.OnOutput, ready = signalOn(Stdout, "ready")
	p, err := Start(context.Background(), withLaunch(spec))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ready, "ready")
	stopped := time.Now()
	p.Stop(nil)
	res := p.Wait()
	if res.Outcome != Stopped || !res.Killed || res.Signal != "killed" || res.ExitCode != -1 {
		t.Fatalf("result = %+v, want killed after grace", res)
	}
	if d := res.Ended.Sub(stopped); d < grace {
		t.Errorf("killed %v after Stop, before the %v grace", d, grace)
	}
}

func TestGrandchildDoesNotSurvive(t *testing.T) {
	t.Parallel()
	t.Run("leader exits by itself", func(t *testing.T) {
		t.Parallel()
		// The grandchild ignores SIGTERM too: only the group SIGKILL gets it.
		res := run(t, shSpec(t, `(trap '' TERM; exec sleep 1000) >/dev/null 2>&1 & echo $!`))
		if res.Outcome != Exited || res.ExitCode != 0 {
			t.Fatalf("result %+v", res)
		}
		waitGone(t, firstInt(t, res.Stdout.String()))
	})
	t.Run("leader stopped", func(t *testing.T) {
		t.Parallel()
		spec := shSpec(t, `sleep 1000 & echo $!; wait`)
		var ready <-chan struct{}
		spec.OnOutput, ready = signalOn(Stdout, "\n")
		p, err := Start(context.Background(), withLaunch(spec))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ready, "grandchild pid")
		p.Stop(errors.New("test over"))
		res := p.Wait()
		if res.Outcome != Stopped {
			t.Fatalf("result %+v", res)
		}
		waitGone(t, firstInt(t, res.Stdout.String()))
	})
}

func TestGrandchildHoldingStdoutDoesNotBlockWait(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res := run(t, shSpec(t, `sleep 1000 & echo started`))
	if res.Outcome != Exited || res.Stdout.String() != "started\n" || res.OutputAbandoned {
		t.Fatalf("result %+v stdout %q", res, res.Stdout.String())
	}
	// The group kill closes the pipe at once; no drain deadline needed.
	if d := time.Since(start); d >= drainTimeout {
		t.Errorf("Wait took %v", d)
	}
}

// A process that leaves the group with setsid escapes the cleanup (a known
// limit) but must not block Wait by holding the output pipe.
func TestSetsidEscapeeCannotBlockWait(t *testing.T) {
	t.Parallel()
	lookPath(t, "setsid")
	dir := t.TempDir()
	spec := shSpec(t, `setsid sh -c 'echo $$ > pid; exec sleep 1000' &
		while [ ! -s pid ]; do sleep 0.01; done; cat pid`)
	spec.Dir = dir
	res := run(t, spec)
	pid := firstInt(t, res.Stdout.String())
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(t, pid)
	})
	if res.Outcome != Exited || !res.OutputAbandoned {
		t.Fatalf("result %+v, want exited with abandoned output", res)
	}
	if gone(pid) {
		t.Log("escapee died anyway; the known limit may have been lifted")
	}
}

func TestNoOutputTimeout(t *testing.T) {
	t.Parallel()
	t.Run("silent process is hung", func(t *testing.T) {
		t.Parallel()
		res := run(t, Spec{Path: lookPath(t, "sleep"), Args: []string{"1000"}, NoOutputTimeout: 200 * time.Millisecond})
		if res.Outcome != Hung || !errors.Is(res.StopCause, ErrNoOutput) {
			t.Fatalf("result %+v, want hung", res)
		}
	})
	t.Run("output on either stream resets it", func(t *testing.T) {
		t.Parallel()
		// About 1.6s of run time in 50ms steps, the second half on stderr
		// only. The timeout is generous (20 steps) because each step forks
		// a sleep, which can stall badly on a loaded CI machine.
		spec := shSpec(t, `i=0; while [ $i -lt 32 ]; do
			if [ $i -lt 16 ]; then echo tick; else echo tock >&2; fi
			sleep 0.05; i=$((i+1)); done`)
		spec.NoOutputTimeout = time.Second
		res := run(t, spec)
		if res.Outcome != Exited || res.ExitCode != 0 {
			t.Fatalf("result %+v, want exited", res)
		}
		if res.Duration() <= spec.NoOutputTimeout {
			t.Errorf("ran %v, not longer than the timeout; the test proves nothing", res.Duration())
		}
	})
}

func TestFloodKeepsMemoryBounded(t *testing.T) {
	// Not parallel: it measures the heap.
	const flood = 200 << 20
	spec := shSpec(t, fmt.Sprintf(`printf 'BEGIN\n'; head -c %d /dev/zero; printf 'END\n'`, flood))
	var seen, logged, chunks atomic.Int64
	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	spec.OnOutput = func(s Stream, p []byte) {
		seen.Add(int64(len(p)))
		// Sample the heap now and then while the flood is going on.
		if s == Stdout && chunks.Add(1)%500 == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	}
	spec.LogFile = writerFunc(func(p []byte) (int, error) { logged.Add(int64(len(p))); return len(p), nil })
	res := run(t, spec)

	const total int64 = flood + int64(len("BEGIN\n")+len("END\n"))
	out := res.Stdout
	if out.Total != total || !out.Truncated || len(out.Head)+len(out.Tail) != DefaultMaxCapture {
		t.Fatalf("capture total %d truncated %v head %d tail %d", out.Total, out.Truncated, len(out.Head), len(out.Tail))
	}
	if !bytes.HasPrefix(out.Head, []byte("BEGIN\n")) || !bytes.HasSuffix(out.Tail, []byte("END\n")) {
		t.Errorf("head/tail do not hold the first/last bytes")
	}
	if out.Omitted() != total-DefaultMaxCapture {
		t.Errorf("omitted %d", out.Omitted())
	}
	if seen.Load() != total || logged.Load() != total {
		t.Errorf("OnOutput saw %d bytes, log got %d, want %d", seen.Load(), logged.Load(), total)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	const limit = 16 << 20
	for what, v := range map[string]uint64{"peak": peak, "after": ms.HeapInuse} {
		if v > base && v-base > limit {
			t.Errorf("%s heap in use grew by %d MiB (limit %d MiB)", what, (v-base)>>20, limit>>20)
		}
	}
	t.Logf("heap in use: base %d KiB, peak %d KiB, after %d KiB", base>>10, peak>>10, ms.HeapInuse>>10)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestOutputStreamingAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := shSpec(t, `pwd; echo to-err >&2; echo done`)
	spec.Dir = dir
	var mu sync.Mutex
	got := map[Stream]*bytes.Buffer{Stdout: {}, Stderr: {}}
	spec.OnOutput = func(s Stream, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		got[s].Write(p)
	}
	var log bytes.Buffer
	spec.LogFile = &log // writes are serialised by the Process
	res := run(t, spec)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := real + "\ndone\n"; got[Stdout].String() != want || res.Stdout.String() != want {
		t.Errorf("stdout streamed %q, captured %q, want %q", got[Stdout], res.Stdout.String(), want)
	}
	if got[Stderr].String() != "to-err\n" || res.Stderr.String() != "to-err\n" {
		t.Errorf("stderr streamed %q, captured %q", got[Stderr], res.Stderr.String())
	}
	if log.Len() != len(real)+len("\ndone\n")+len("to-err\n") || !strings.Contains(log.String(), "to-err\n") {
		t.Errorf("log %q", log.String())
	}
}

func TestLogFileErrorIsReportedNotFatal(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk full")
	spec := shSpec(t, `echo a; echo b`)
	spec.LogFile = writerFunc(func([]byte) (int, error) { return 0, boom })
	res := run(t, spec)
	if !errors.Is(res.LogErr, boom) || res.Stdout.String() != "a\nb\n" || res.Outcome != Exited {
		t.Fatalf("result %+v", res)
	}
}

func TestContextCancelStopsWithCause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cause := errors.New("attempt cancelled by user")
	spec := shSpec(t, `echo ready; exec sleep 1000`)
	var ready <-chan struct{}
	spec.OnOutput, ready = signalOn(Stdout, "ready")
	p, err := Start(ctx, withLaunch(spec))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ready, "ready")
	cancel(cause)
	res := p.Wait()
	if res.Outcome != Stopped || !errors.Is(res.StopCause, cause) || res.Signal != "terminated" {
		t.Fatalf("result %+v, want stopped by the ctx cause", res)
	}
}

func TestCancelledContextDoesNotStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("too late")
	cancel(cause)
	_, err := Start(ctx, withLaunch(shSpec(t, "exit 0")))
	if !errors.Is(err, ErrStart) || !errors.Is(err, cause) {
		t.Fatalf("err = %v", err)
	}
}

func TestStopIsIdempotent(t *testing.T) {
	t.Parallel()
	p, err := Start(context.Background(), withLaunch(Spec{Path: lookPath(t, "sleep"), Args: []string{"1000"}}))
	if err != nil {
		t.Fatal(err)
	}
	causes := make([]error, 8)
	var wg sync.WaitGroup
	for i := range causes {
		causes[i] = fmt.Errorf("stop %d", i)
		wg.Go(func() { p.Stop(causes[i]) })
	}
	wg.Wait()
	res := p.Wait()
	p.Stop(errors.New("after the end"))
	if again := p.Wait(); again != res {
		t.Errorf("second Wait returned a different result")
	}
	if res.Outcome != Stopped || res.Signal != "terminated" {
		t.Fatalf("result %+v", res)
	}
	found := false
	for _, c := range causes {
		found = found || errors.Is(res.StopCause, c)
	}
	if !found {
		t.Errorf("StopCause %v is none of the causes passed", res.StopCause)
	}
}

func TestStopAfterExitChangesNothing(t *testing.T) {
	t.Parallel()
	p, err := Start(context.Background(), withLaunch(shSpec(t, "exit 3")))
	if err != nil {
		t.Fatal(err)
	}
	<-p.exited // the waiter has seen the exit
	p.Stop(nil)
	res := p.Wait()
	if res.Outcome != Exited || res.ExitCode != 3 || res.StopCause != nil {
		t.Fatalf("result %+v, want a plain exit 3", res)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := lookPath(t, "sh")
	for _, tc := range []struct {
		name string
		spec Spec
		want error
	}{
		{"missing binary", Spec{Path: filepath.Join(dir, "nope")}, fs.ErrNotExist},
		{"not executable", Spec{Path: notExec}, fs.ErrPermission},
		{"relative path", Spec{Path: "sh"}, ErrInvalidSpec},
		{"missing dir", Spec{Path: sh, Dir: filepath.Join(dir, "nope")}, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(context.Background(), withLaunch(tc.spec))
			if p != nil || !errors.Is(err, ErrStart) || !errors.Is(err, tc.want) {
				t.Fatalf("Start = %v, %v; want an error wrapping %v", p, err, tc.want)
			}
			var pe *fs.PathError
			if tc.want != ErrInvalidSpec && !errors.As(err, &pe) {
				t.Errorf("error %v does not wrap the os error", err)
			}
		})
	}
}

// TestPdeathsig SIGKILLs a process that runs a child through supervise; the
// kernel must take the child down with it.
func TestPdeathsig(t *testing.T) {
	t.Parallel()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=pdeathsig", "SUPERVISE_SLEEP="+lookPath(t, "sleep"))
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("reading child pid from helper: %v", err)
	}
	child := firstInt(t, line)
	if gone(child) {
		t.Fatalf("child %d not running before the helper is killed", child)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	waitGone(t, child)
}

// TestLimits: configured resource limits bind the CLI.
func TestLimits(t *testing.T) {
	res, err := Run(context.Background(), withLaunch(Spec{
		// Limits bind right after exec (see Limits); the pause keeps the
		// shell from reading them inside that window.
		Path: "/bin/sh", Args: []string{"-c", "sleep 0.3; ulimit -n; ulimit -f"}, Dir: t.TempDir(),
		Env:    []string{"PATH=/usr/bin:/bin"},
		Limits: Limits{OpenFiles: 64, FileSize: 1 << 20},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.LimitErr != nil {
		t.Fatal(res.LimitErr)
	}
	// dash and bash print -f in 512- or 1024-byte blocks.
	out := strings.Fields(res.Stdout.String())
	if len(out) != 2 || out[0] != "64" || (out[1] != "2048" && out[1] != "1024") {
		t.Errorf("limits seen by the CLI: %q", res.Stdout.String())
	}
}

// TestLaunch: what Launch returns is what runs, with its files as
// descriptors 3, 4, … (closed in the parent afterwards), under the same
// supervision; a Launch error or a missing binary is ErrStart.
func TestLaunch(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("from fd 3"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	spec := shSpec(t, `printf '%s|' "$0" "$1"; cat <&3`)
	spec.Args = append(spec.Args, "arg0", "arg1")
	spec.Launch = func(e Exec) (Exec, error) {
		// Run it through env, which execs it, as the sandbox's step does.
		return Exec{Path: lookPath(t, "env"), Argv: append([]string{"env", "VIA=env"}, e.Argv...), Files: []*os.File{r}}, nil
	}
	res := run(t, spec)
	if got := strings.TrimSpace(res.Stdout.String()); res.ExitCode != 0 || got != "arg0|arg1|from fd 3" {
		t.Errorf("exit %d, stdout %q", res.ExitCode, got)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the launch's file was not closed in the parent: %v", err)
	}

	spec.Launch = func(Exec) (Exec, error) { return Exec{}, errors.New("no sandbox today") }
	if _, err := Start(context.Background(), spec); !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "no sandbox today") {
		t.Errorf("Launch error: %v", err)
	}
	missing := spec
	missing.Path = filepath.Join(t.TempDir(), "no-such-cli")
	if _, err := Start(context.Background(), missing); !errors.Is(err, ErrStart) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing binary with a Launch: %v", err)
	}
}

// TestConfinedRunIsConfined makes sure the second run of the suite is what
// it says: its processes cannot write outside the temp dir.
func TestConfinedRunIsConfined(t *testing.T) {
	if testLaunch == nil {
		t.Skip("the plain run; the confined one checks")
	}
	res := run(t, withLaunch(shSpec(t, "echo x > /etc/drover-supervise-escape")))
	if res.ExitCode == 0 || !strings.Contains(res.Stderr.String(), "Permission denied") {
		t.Errorf("exit %d, stderr %q", res.ExitCode, res.Stderr.String())
	}
	if _, err := os.Stat("/etc/drover-supervise-escape"); err == nil {
		os.Remove("/etc/drover-supervise-escape")
		t.Error("a confined process wrote /etc")
	}
}
