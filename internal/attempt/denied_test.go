package attempt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/transcript"
)

// confinement compiles a policy that lets a process connect to 443 only;
// no kernel support is needed to compile one.
func confinement(t *testing.T, dir string) *sandbox.Confinement {
	t.Helper()
	sb, err := sandbox.New(sandbox.Support{ABI: sandbox.MinABI})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sb.Compile(sandbox.Policy{Own: []sandbox.Grant{{Path: dir, Write: true}}, Connect: []uint16{443}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// modelEndpoint is the endpoint the recorded CLIs were configured for.
var modelEndpoint = sandbox.Endpoint{Addr: "127.0.0.1:41234", Port: 41234, Source: "its configuration"}

// feed passes a recording's lines through a tap, as the attempt does.
func feed(t *testing.T, tp *tap, cli string) {
	t.Helper()
	dir := filepath.Join("../../testdata/transcripts", cli, "sandbox-denied")
	for _, s := range []struct {
		file   string
		stream transcript.Stream
	}{{"stdout.txt", transcript.Stdout}, {"stderr.txt", transcript.Stderr}} {
		b, err := os.ReadFile(filepath.Join(dir, s.file))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			tp.Line(s.stream, []byte(strings.TrimSuffix(line, "\n")))
		}
	}
}

// The real CLIs whose model port the sandbox refused
// (testdata/transcripts/*/sandbox-denied) are seen stuck on it, through
// their parsers: codex retrying, pi's retries, opencode's and kilo's one
// error, which names the URL.
func TestTapRecordedDenials(t *testing.T) {
	for cli, want := range map[string]int{"codex": 3, "pi": 2, "opencode": 1, "kilo": 1} {
		format := map[string]drovertype.OutputFormat{"codex": drovertype.FormatCodexJSON, "pi": drovertype.FormatPiJSON,
			"opencode": drovertype.FormatOpenCodeJSON, "kilo": drovertype.FormatOpenCodeJSON}[cli]
		den := confinement(t, t.TempDir()).Denials(t.TempDir())
		den.SetEndpoints([]sandbox.Endpoint{modelEndpoint})
		p := transcript.NewParser(format)
		tp := &tap{Parser: p, den: den, counter: p.(transcript.ProgressCounter)}
		feed(t, tp, cli)
		s, ok := den.Stuck()
		if !ok || s.What != "tcp/41234" || s.Addr != "127.0.0.1:41234" || s.Times < want {
			t.Errorf("%s: stuck %+v %v, want tcp/41234 at least %d times", cli, s, ok, want)
		}
	}
}

// A line that moves the run on ends a streak; one that is refused, or
// that is not the CLI's own word, does not count as its connection
// failure.
func TestTapProgress(t *testing.T) {
	den := confinement(t, t.TempDir()).Denials(t.TempDir())
	den.SetEndpoints([]sandbox.Endpoint{modelEndpoint})
	p := transcript.NewParser(drovertype.FormatCodexJSON)
	tp := &tap{Parser: p, den: den, counter: p.(transcript.ProgressCounter)}
	retry := `{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`
	tp.Line(transcript.Stdout, []byte(retry))
	tp.Line(transcript.Stdout, []byte(retry))
	if s, ok := den.Stuck(); !ok || s.Times != 2 {
		t.Fatalf("stuck %+v %v", s, ok)
	}
	// A command the agent ran, which failed to connect somewhere: its
	// result is the agent's, not codex's failure to reach its model.
	tp.Line(transcript.Stdout, []byte(`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"curl x","aggregated_output":"Connection failed","exit_code":7,"status":"failed"}}`))
	if s, _ := den.Stuck(); s.Times != 2 {
		t.Errorf("a tool's connection failure was put on the model's endpoint: %+v", s)
	}
	// A refused command is no progress.
	tp.Line(transcript.Stdout, []byte(`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"nc","aggregated_output":"nc: connect to 127.0.0.1 port 41234 (tcp) failed: Permission denied","exit_code":1,"status":"completed"}}`))
	if s, ok := den.Stuck(); !ok || s.Times != 3 {
		t.Errorf("a refused tool result counted as progress: %+v %v", s, ok)
	}
	// One that did its work is.
	tp.Line(transcript.Stdout, []byte(`{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"grep -r 'Connection failed' logs","aggregated_output":"logs/a: Connection failed","exit_code":0,"status":"completed"}}`))
	if s, ok := den.Stuck(); ok {
		t.Errorf("stuck after progress: %+v", s)
	}

	// Plain text: any line that is refused nothing is progress.
	den2 := confinement(t, t.TempDir()).Denials(t.TempDir())
	tp2 := &tap{Parser: transcript.NewParser(drovertype.FormatText), den: den2}
	tp2.Line(transcript.Stdout, []byte("bash: connect: Permission denied"))
	tp2.Line(transcript.Stdout, []byte("bash: line 1: /dev/tcp/127.0.0.1/5432: Permission denied"))
	tp2.Line(transcript.Stdout, []byte("   "))
	tp2.Line(transcript.Stdout, []byte("bash: connect: Permission denied"))
	if _, ok := den2.Stuck(); !ok {
		t.Error("a blank line ended the streak")
	}
	tp2.Line(transcript.Stdout, []byte("running the tests"))
	if _, ok := den2.Stuck(); ok {
		t.Error("a line of work did not end the streak")
	}
}

// fakeTimer is a timer the test fires.
type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (f *fakeTimer) Stop() bool { f.stopped = true; return true }

// The watch stops a CLI refused the same twice with nothing done in
// between once the streak is own_retry_timeout old — not one refused once,
// not one that changed a file meanwhile, not at once after the refusal
// that made it due — and its timer does so while the CLI is silent.
func TestDenialWatch(t *testing.T) {
	wt := t.TempDir()
	clock := time.Now()
	now := func() time.Time { return clock }
	den := confinement(t, wt).Denials(wt)
	w := newDenialWatch(den, 15*time.Second, changedSince(wt), now)
	var timer *fakeTimer
	w.after = func(d time.Duration, f func()) stopper { timer = &fakeTimer{d: d, f: f}; return timer }
	refuse := func() {
		if den.Line([]byte("Error: connect EACCES 127.0.0.1:41234"), true) != sandbox.HeardRefusal {
			t.Fatal("not recorded")
		}
		w.check()
	}
	fire := func() error { // the timer fires
		t.Helper()
		if timer == nil || timer.stopped {
			t.Fatal("no timer armed")
		}
		timer.f()
		select {
		case err := <-w.stops():
			return err
		default:
			return nil
		}
	}
	refuse()
	clock = clock.Add(time.Minute)
	w.check()
	if timer != nil {
		t.Fatalf("refused once, a timer armed for %s", timer.d)
	}
	// Twice: armed for own_retry_timeout after the first.
	den.Progress()
	w.check()
	refuse()
	clock = clock.Add(5 * time.Second)
	refuse()
	if timer == nil || timer.d != 10*time.Second {
		t.Fatalf("timer %+v, want one in 10s", timer)
	}
	// Work meanwhile: disarmed by the next output.
	den.Progress()
	w.check()
	if !timer.stopped {
		t.Fatal("progress did not disarm the timer")
	}
	// The refusal that makes a streak due arms for settle after it.
	refuse()
	clock = clock.Add(20 * time.Second)
	refuse()
	if timer.stopped || timer.d != settle {
		t.Fatalf("timer %+v, want one in %s", timer, settle)
	}
	// A file written after the streak began is work.
	if err := os.WriteFile(filepath.Join(wt, "work.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(wt, "work.txt"), clock, clock); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(settle)
	if err := fire(); err != nil {
		t.Fatalf("stopped though a file changed: %v", err)
	}
	if _, ok := den.Stuck(); ok {
		t.Fatal("the file change did not end the streak")
	}
	// Stuck, silent: the timer stops it, with what and for how long.
	clock = clock.Add(time.Hour) // past the file's time
	refuse()
	clock = clock.Add(3 * time.Second)
	refuse()
	clock = clock.Add(12 * time.Second)
	err := fire()
	if err == nil || !strings.Contains(err.Error(), "stuck on tcp/41234, refused by the sandbox 2 times in 15s") {
		t.Fatalf("stop %v", err)
	}
	// Once.
	refuse()
	if err := fire(); err != nil {
		t.Errorf("stopped twice: %v", err)
	}
	w.close()

	// With the real timer.
	quiet := t.TempDir()
	den = confinement(t, quiet).Denials(quiet)
	w = newDenialWatch(den, 50*time.Millisecond, changedSince(quiet), time.Now)
	w.settle = 10 * time.Millisecond
	defer w.close()
	for range 2 {
		den.Line([]byte("Error: connect EACCES 127.0.0.1:41234"), true)
		w.check()
	}
	select {
	case err := <-w.stops():
		if !strings.Contains(err.Error(), "tcp/41234") {
			t.Errorf("stop %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the timer did not stop a silent CLI")
	}
}

// What a SANDBOX_DENIED says: what was refused, and what would let it
// through.
func TestDeniedFailure(t *testing.T) {
	wt := t.TempDir()
	sb, err := sandbox.New(sandbox.Support{ABI: sandbox.MinABI})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "worker.nk")
	c, err := sb.Compile(sandbox.Policy{Own: []sandbox.Grant{{Path: wt, Write: true}}, Deny: []string{secret}, Connect: []uint16{443}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		s    sandbox.Stuck
		then string
		want string
	}{
		{sandbox.Stuck{What: "tcp/41234", Addr: "127.0.0.1:41234", Times: 3, Line: "l"}, "",
			"connect to 127.0.0.1:41234 refused by the sandbox: add the port to runtimes.codex.sandbox.connect; refused 3 times in 17s with nothing else done, then Drover stopped the CLI; first: l"},
		{sandbox.Stuck{What: "tcp/8080", Source: "provider.x.options.baseURL in /c.json", Times: 1, Line: "l"}, "RUNTIME_ERROR: exit code 1",
			"connect to port 8080 refused by the sandbox: add the port to runtimes.codex.sandbox.connect; named by provider.x.options.baseURL in /c.json; refused 1 times, and then the CLI failed: RUNTIME_ERROR: exit code 1; first: l"},
		{sandbox.Stuck{What: secret, Times: 2, Line: "l"}, "", "it is the worker's own, which no runtime may reach"},
		{sandbox.Stuck{What: "/usr/lib/x", Times: 2, Line: "l"}, "", "writing /usr/lib/x refused by the sandbox: add it to runtimes.codex.sandbox.write"},
		{sandbox.Stuck{What: "/srv/data", Times: 2, Line: "l"}, "", "/srv/data refused by the sandbox: add it to runtimes.codex.sandbox.read (or .write)"},
	} {
		took := time.Duration(0)
		if x.then == "" {
			took = 17 * time.Second
		}
		e := deniedFailure("codex", c, x.s, took, x.then)
		if e.Class != drovertype.ClassSandboxDenied || e.Category != drovertype.CategoryInfrastructure || e.Recoverable || !strings.Contains(e.Message, x.want) {
			t.Errorf("%s: %+v\nwant %q", x.s.What, e, x.want)
		}
	}
}
