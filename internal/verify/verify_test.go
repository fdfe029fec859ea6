package verify

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env() []string { return []string{"PATH=" + os.Getenv("PATH"), "ONLY_THIS=yes"} }

func TestPass(t *testing.T) {
	dir := t.TempDir()
	res := Run(context.Background(), Spec{Dir: dir, Env: env(), Commands: []string{
		"echo out; sleep 0.1; echo err >&2; sleep 0.1; echo out2",
		"pwd; echo $ONLY_THIS; echo ${HOME:-nohome}",
	}})
	if len(res) != 2 || !Passed(res) {
		t.Fatalf("results %+v", res)
	}
	// Both streams, interleaved in the order read: stderr lands between the
	// stdout lines (the pauses make the order observable).
	if res[0].Output != "out\nerr\nout2\n" {
		t.Errorf("interleaved output %q", res[0].Output)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if want := real + "\nyes\nnohome\n"; res[1].Output != want {
		t.Errorf("dir/env: %q, want %q", res[1].Output, want)
	}
	if res[0].Command != "echo out; sleep 0.1; echo err >&2; sleep 0.1; echo out2" || res[0].ExitCode != 0 || res[0].TimedOut {
		t.Errorf("result %+v", res[0])
	}
}

func TestFailStops(t *testing.T) {
	res := Run(context.Background(), Spec{Dir: t.TempDir(), Env: env(), Commands: []string{
		"true", "echo broken; exit 3", "touch should-not-run",
	}})
	if len(res) != 2 || Passed(res) {
		t.Fatalf("results %+v", res)
	}
	if r := res[1]; r.ExitCode != 3 || !Failed(r) || r.Output != "broken\n" {
		t.Errorf("failed result %+v", r)
	}
	if got := Describe(res[1]); got != "`echo broken; exit 3` exited 3" {
		t.Errorf("describe %q", got)
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestTimeoutKillsGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	for _, c := range []struct{ name, prefix string }{
		{"term", ""},
		{"ignores term", "trap '' TERM; "}, // SIGKILL after the grace period
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			start := time.Now()
			res := Run(context.Background(), Spec{Dir: dir, Env: env(), Timeout: 300 * time.Millisecond, Grace: 200 * time.Millisecond,
				Commands: []string{c.prefix + "sleep 30 & echo $! > " + pidFile + "; echo started; wait", "true"}})
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			if len(res) != 1 || !res[0].TimedOut || !Failed(res[0]) || res[0].ExitCode == 0 {
				t.Fatalf("results %+v", res)
			}
			if !strings.Contains(res[0].Output, "started") || !strings.Contains(res[0].Output, "timed out") {
				t.Errorf("output %q", res[0].Output)
			}
			if !strings.Contains(Describe(res[0]), "timed out") {
				t.Errorf("describe %q", Describe(res[0]))
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			deadline := time.Now().Add(5 * time.Second)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("backgrounded child %d survived", pid)
			}
		})
	}
}

func TestOutputBound(t *testing.T) {
	res := Run(context.Background(), Spec{Dir: t.TempDir(), Env: env(), MaxOutput: 1000, Commands: []string{
		"echo HEAD; i=0; while [ $i -lt 2000 ]; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done; echo TAIL",
	}})
	if len(res) != 1 || !Passed(res) {
		t.Fatalf("results %+v", res)
	}
	out := res[0].Output
	if !strings.HasPrefix(out, "HEAD\n") || !strings.HasSuffix(out, "TAIL\n") || !strings.Contains(out, "bytes omitted") || len(out) > 1100 {
		t.Errorf("bounded output (%d bytes): %q", len(out), out)
	}
}

func TestDefaultsAndCancel(t *testing.T) {
	if res := Run(context.Background(), Spec{Dir: t.TempDir()}); len(res) != 0 || !Passed(res) {
		t.Errorf("no commands: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res := Run(ctx, Spec{Dir: t.TempDir(), Env: env(), Grace: 100 * time.Millisecond, Commands: []string{"sleep 30", "true"}})
	if len(res) != 1 || !Failed(res[0]) || res[0].TimedOut {
		t.Errorf("cancelled: %+v", res)
	}
	// A missing directory is a failure to start, reported, not a panic.
	res = Run(context.Background(), Spec{Dir: filepath.Join(t.TempDir(), "nope"), Env: env(), Commands: []string{"true"}})
	if len(res) != 1 || res[0].ExitCode != -1 || res[0].Output == "" {
		t.Errorf("bad dir: %+v", res)
	}
}
