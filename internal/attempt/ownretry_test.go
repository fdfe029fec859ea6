package attempt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// The fake CLIs (demo-agent in persona mode, replaying the recordings of
// testdata/transcripts at the recorded CLI's pace: docs/demo-agent.md),
// built once for the tests that need them and removed by TestMain.
var fakes struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakes.dir != "" {
		os.RemoveAll(fakes.dir)
	}
	os.Exit(code)
}

// fakeCLIs returns the directory holding demo-agent and a symlink per CLI
// name, which makes it play that CLI.
func fakeCLIs(tb testing.TB) string {
	tb.Helper()
	fakes.once.Do(func() {
		if fakes.dir, fakes.err = os.MkdirTemp("", "drover-attempt-fakes-"); fakes.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", fakes.dir+"/", "../../cmd/demo-agent").CombinedOutput()
		if err != nil {
			fakes.err = fmt.Errorf("go build demo-agent: %v\n%s", err, out)
			return
		}
		for _, cli := range clis {
			if fakes.err = os.Symlink("demo-agent", filepath.Join(fakes.dir, cli.binary)); fakes.err != nil {
				return
			}
		}
	})
	if fakes.err != nil {
		tb.Fatal(fakes.err)
	}
	return fakes.dir
}

// clis are the built-in runtimes of the seven CLIs and their binaries.
var clis = []struct{ runtime, binary string }{
	{"claude-code", "claude"}, {"codex", "codex"}, {"opencode", "opencode"}, {"kilo", "kilo"},
	{"gemini", "gemini"}, {"pi", "pi"}, {"copilot", "copilot"},
}

// builtin is a built-in runtime as a worker with no configuration has it,
// its binary the fake, replaying at pace ("recorded" is the real CLI's).
func builtin(tb testing.TB, name, binary, pace string, ownRetry time.Duration) config.Runtime {
	tb.Helper()
	cfg := &config.Config{}
	cfg.WithDefaults()
	rt := cfg.Runtimes[name]
	transcripts, err := filepath.Abs("../../testdata/transcripts")
	if err != nil {
		tb.Fatal(err)
	}
	rt.Binary = filepath.Join(fakeCLIs(tb), binary)
	rt.Grace = time.Second
	rt.Timeout = 10 * time.Minute
	if ownRetry > 0 {
		rt.OwnRetryTimeout = ownRetry
	}
	// IS_SANDBOX=1: claude refuses to bypass permissions as root without it.
	rt.Env = append(slices.Clone(rt.Env), "DEMO_AGENT_TRANSCRIPTS="+transcripts, "DEMO_AGENT_PACE="+pace, "IS_SANDBOX=1")
	return rt
}

// ownRetryRun runs one attempt of a built-in runtime whose fake CLI replays
// the recording cs at pace.
func ownRetryRun(tb testing.TB, h *harness, name, binary, cs, pace string, ownRetry time.Duration) (*event.Report, time.Duration) {
	tb.Helper()
	h.agent = adapter.NewCommand(name, builtin(tb, name, binary, pace, ownRetry))
	start := time.Now()
	rep, _ := h.run(h.job("create hello.txt containing hi\n@case "+cs), nil)
	return rep, time.Since(start)
}

// Every CLI that is rate limited or refused, retrying at its recorded pace
// 20 times faster (gemini's 5 minutes of backoff take 15 s), ends with the
// output's class; where the CLI would retry on past own_retry_timeout
// (scaled the same: 750 ms), Drover stopped it, and says so. A fake that
// is not stopped replays to its recorded end, so a missing stop fails
// here, not only in the benchmark's figures.
func TestOwnRetriesEndInTime(t *testing.T) {
	for _, cli := range clis {
		for _, cs := range []string{"fail-401", "fail-429"} {
			t.Run(cli.runtime+"/"+cs, func(t *testing.T) {
				h := newHarness(t)
				rep, took := ownRetryRun(t, h, cli.runtime, cli.binary, cs, "recorded/20", 750*time.Millisecond)
				want := drovertype.ClassRateLimited
				if cs == "fail-401" {
					want = drovertype.ClassAuthFailed
				}
				wantClass(t, rep, want)
				t.Logf("%s %s: %s in %s", cli.runtime, cs, rep.Error.Message, took)
				// The recordings that retry past the limit: gemini (309 s, 15 s
				// here) and pi (23 s, 1.2 s here).
				if cli.binary == "gemini" && cs == "fail-429" || cli.binary == "pi" && cs == "fail-429" {
					if !strings.Contains(rep.Error.Message, "Drover stopped the CLI after") {
						t.Errorf("not stopped after its own retries: %q", rep.Error.Message)
					}
				}
				if rep.Branch != "" || rep.Commit != "" {
					t.Errorf("pushed %s@%s", rep.Branch, rep.Commit)
				}
			})
		}
	}
}

// A CLI that gets past a rate limit on its own is not stopped: gemini's
// retry notice, then a successful run, at the recorded pace.
func TestOwnRetriesTransientRateLimit(t *testing.T) {
	h := newHarness(t)
	rt := builtin(t, "gemini", "gemini", "10ms", time.Second)
	h.agent = adapter.NewCommand("gemini", rt)
	job := h.job("create hello.txt containing hi\n" +
		"@stderr Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}\n" +
		"@sleep 50ms\n@case success")
	rep, _ := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("a CLI that got past a 429 failed: %+v", rep.Error)
	}
	// And one that retries and goes quiet for longer than the limit is stopped
	// by the timer, with no output to check on.
	job = h.job("create hello.txt containing hi\n" +
		"@stderr Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}\n" +
		"@sleep 1m\n@case success")
	rep, _ = h.run(job, nil)
	wantClass(t, rep, drovertype.ClassRateLimited)
	if !strings.Contains(rep.Error.Message, "of its own retries") {
		t.Errorf("message %q", rep.Error.Message)
	}
}

// BenchmarkOwnRetries measures how long a rate-limited and a refused
// attempt of each built-in runtime takes to end, with its fake CLI
// replaying the recorded 429 and 401 runs at the real CLI's pace and the
// runtime's defaults (docs/runtimes.md#their-own-retries has the table):
//
//	go test -run '^$' -bench BenchmarkOwnRetries -benchtime 1x ./internal/attempt/
//
// The fourteen attempts run at once, each in its own repository; a
// metric per runtime and case, in seconds.
func BenchmarkOwnRetries(b *testing.B) {
	for b.Loop() {
		var mu sync.Mutex
		took := map[string]time.Duration{}
		var wg sync.WaitGroup
		for _, cli := range clis {
			for _, cs := range []string{"fail-401", "fail-429"} {
				h := newHarness(b)
				rt := builtin(b, cli.runtime, cli.binary, "recorded", 0)
				wg.Go(func() {
					h.agent = adapter.NewCommand(cli.runtime, rt)
					start := time.Now()
					rep, _ := h.run(h.job("create hello.txt containing hi\n@case "+cs), nil)
					d := time.Since(start)
					mu.Lock()
					defer mu.Unlock()
					took[cli.runtime+"-"+strings.TrimPrefix(cs, "fail-")] = d
					if rep.Error == nil {
						b.Errorf("%s %s succeeded", cli.runtime, cs)
					}
				})
			}
		}
		wg.Wait()
		for name, d := range took {
			b.ReportMetric(d.Seconds(), "s/"+name)
		}
	}
}

// Without its cap claude retries a refused key for 3 minutes (189 s
// recorded, 9.5 s here): Drover stops it after own_retry_timeout.
func TestOwnRetriesUncappedClaude(t *testing.T) {
	h := newHarness(t)
	rt := builtin(t, "claude-code", "claude", "recorded/20", 750*time.Millisecond)
	rt.Env = append(rt.Env, "CLAUDE_CODE_MAX_RETRIES=") // not a number: the fake, like claude, retries 10 times
	h.agent = adapter.NewCommand("claude-code", rt)
	rep, _ := h.run(h.job("create hello.txt containing hi\n@case fail-401"), nil)
	wantClass(t, rep, drovertype.ClassAuthFailed)
	if !strings.Contains(rep.Error.Message, "Drover stopped the CLI after") || rep.Error.Status != 401 {
		t.Errorf("error %+v", rep.Error)
	}
}
