package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
)

// result is what one command line did.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs a command line in this process, as main does, with stdout a
// pipe (a buffer) or the given writer.
func cli(t *testing.T, ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out bytes.Buffer
	if stdout == nil {
		stdout = &out
	}
	var errb bytes.Buffer
	code := run(ctx, args, stdin, stdout, &errb)
	if b, ok := stdout.(interface{ String() string }); ok {
		return result{b.String(), errb.String(), code}
	}
	return result{out.String(), errb.String(), code}
}

// testController is `controller serve` running in this process on a data
// dir of its own, with no workers.
type testController struct {
	dir  string
	url  string
	stop func()
}

func startController(t *testing.T) *testController {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		done <- cli(t, ctx, nil, io.Discard, "serve", "--data-dir", dir, "--nats-listen", "127.0.0.1:-1", "--log-level", "error")
	}()
	c := &testController{dir: dir}
	c.stop = func() {
		cancel()
		if r := <-done; r.code != 0 {
			t.Errorf("serve exited %d: %s", r.code, r.stderr)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := cli(t, context.Background(), nil, nil, "status", "--data-dir", dir); r.code == 0 {
			b, _ := os.ReadFile(filepath.Join(dir, "nats.url"))
			c.url = strings.TrimSpace(string(b))
			break
		}
		select {
		case r := <-done:
			t.Fatalf("serve exited %d: %s", r.code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the controller did not answer in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(c.stop)
	return c
}

// submit submits a flow of one task with the given prompt and returns its id.
func (c *testController) submit(t *testing.T, prompt string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "flow.yaml")
	body := fmt.Sprintf("name: f\nrepo: %s\nruntime: demo\ntasks:\n  - id: t\n    prompt: %q\n", t.TempDir(), prompt)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, context.Background(), nil, nil, "submit", file, "--data-dir", c.dir)
	if r.code != 0 {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	id := strings.Fields(strings.TrimPrefix(r.stdout, "submitted flow "))[0]
	return id
}

func (c *testController) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// bareNATS is a nats-server with JetStream and nothing of Drover on it;
// conf, if set, is its configuration file.
func bareNATS(t *testing.T, conf string) string {
	t.Helper()
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1, ConfigFile: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExitCodes runs every kind of failure of the controller CLI and checks
// its exit code against the table in docs/cli.md (internal/exitcode).
func TestExitCodes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c := startController(t)
	id := c.submit(t, "hello")
	dd := []string{"--data-dir", c.dir}

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(t.TempDir(), "huge.yaml")
	if f, err := os.Create(huge); err == nil {
		_ = f.Truncate(1 << 30)
		f.Close()
	}
	dup := writeTemp(t, "dup.yaml", "name: d\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: x\n  - id: a\n    prompt: y\n")
	badConfig := writeTemp(t, "drover.yaml", "defaults:\n  timeout: 90\n")
	noController := bareNATS(t, "")
	authNATS := bareNATS(t, writeTemp(t, "auth.conf", "authorization { users = [{user: a, password: b}] }\n"))
	closed := fmt.Sprintf("nats://127.0.0.1:%d", closedPort(t))

	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		stdin io.Reader
		code  int
		want  string // in stderr
	}{
		// 0
		{"status", []string{"status"}, nil, nil, exitcode.OK, ""},
		{"status of a flow", []string{"status", id}, nil, nil, exitcode.OK, ""},
		{"events", []string{"events", id}, nil, nil, exitcode.OK, ""},
		{"workers", []string{"workers"}, nil, nil, exitcode.OK, ""},
		{"rebuild", []string{"rebuild"}, nil, nil, exitcode.OK, ""},
		{"submit from stdin", []string{"submit", "-"}, nil,
			strings.NewReader("name: s\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: x\n"), exitcode.OK,
			"warning: no live worker serves demo in pool default: no worker is live in the pool (needed as the runtime of task a)"},
		// 2: usage
		{"unknown command", []string{"nosuch"}, nil, nil, exitcode.Usage, "unknown command"},
		{"unknown flag", []string{"status", "--bogus"}, nil, nil, exitcode.Usage, "unknown flag"},
		{"unknown subcommand", []string{"runtime", "helth"}, nil, nil, exitcode.Usage, `unknown command "helth" for "controller runtime"`},
		{"a group alone", []string{"runtime"}, nil, nil, exitcode.OK, ""},
		{"an unknown shell", []string{"completion", "tcsh"}, nil, nil, exitcode.Usage, `unknown command "tcsh" for "controller completion"`},
		{"a console subcommand", []string{"console", "nosuch"}, nil, nil, exitcode.Usage, `unknown command "nosuch" for "controller console"`},
		{"an unknown help topic", []string{"help", "nosuch"}, nil, nil, exitcode.Usage, `unknown help topic "nosuch"`},
		{"help of a command", []string{"help", "runtime", "list"}, nil, nil, exitcode.OK, ""},
		{"a completion script", []string{"completion", "bash"}, nil, nil, exitcode.OK, ""},
		{"too many arguments", []string{"status", "a", "b"}, nil, nil, exitcode.Usage, "accepts at most 1 arg"},
		{"missing argument", []string{"logs"}, nil, nil, exitcode.Usage, "accepts 1 arg"},
		{"bad -o", []string{"status", "-o", "yaml"}, nil, nil, exitcode.Usage, "-o must be text or json"},
		{"invalid flow", []string{"submit", dup}, nil, nil, exitcode.Usage, "duplicate"},
		{"missing flow file", []string{"submit", "/nonexistent/flow.yaml"}, nil, nil, exitcode.Usage, "no such file"},
		{"flow /dev/zero", []string{"submit", "/dev/zero"}, nil, nil, exitcode.Usage, "/dev/zero: is a character device, not a regular file"},
		{"flow FIFO", []string{"submit", fifo}, nil, nil, exitcode.Usage, "is a named pipe (FIFO)"},
		{"flow directory", []string{"submit", t.TempDir()}, nil, nil, exitcode.Usage, "is a directory"},
		{"flow of 1 GiB", []string{"submit", huge}, nil, nil, exitcode.Usage, "1.0 GiB is larger than the limit of 8.0 MiB"},
		{"endless stdin", []string{"submit", "-"}, nil, zeroReader{}, exitcode.Usage, "<stdin>: larger than the limit of 8.0 MiB"},
		{"invalid flow on stdin", []string{"submit", "-"}, nil, strings.NewReader("name: s\n"), exitcode.Usage, "<stdin>"},
		{"invalid config", []string{"status", "--config", badConfig}, nil, nil, exitcode.Usage, "defaults.timeout: 90 has no unit"},
		{"unknown variable", []string{"status"}, map[string]string{"DROVER_WRKER_SLOTS": "3"}, nil, exitcode.Usage, "did you mean DROVER_WORKER_SLOTS?"},
		{"dev --workers 100000", []string{"dev", "--workers", "100000"}, nil, nil, exitcode.Usage, "--workers must be 0..64 (got 100000)"},
		{"dev --workers -1", []string{"dev", "--workers", "-1"}, nil, nil, exitcode.Usage, "--workers must be 0..64"},
		{"open NATS without auth", []string{"dev", "--data-dir", t.TempDir(), "--nats-listen", "0.0.0.0:-1"}, nil, nil, exitcode.Usage, "nats.listen: 0.0.0.0:-1 takes connections from other hosts"},
		{"open pprof", []string{"serve", "--data-dir", t.TempDir(), "--http-listen", "0.0.0.0:0"}, map[string]string{"DROVER_HTTP_PPROF": "true"}, nil, exitcode.Usage, "http.pprof is on"},
		{"a wildcard flow id", []string{"events", "a*"}, nil, nil, exitcode.Usage, "flow id"},
		{"a flow where an attempt is wanted", []string{"logs", id}, nil, nil, exitcode.Usage, "is a flow"},
		{"dead-letters --limit 0", []string{"dead-letters", "--limit", "0"}, nil, nil, exitcode.Usage, "--limit must be 1..10000"},
		{"resolve without --flow", []string{"runtime", "resolve"}, nil, nil, exitcode.Usage, "--flow is required"},
		{"a refused request", []string{"retry", id + "/t"}, nil, nil, exitcode.Usage, ""},
		// 3: not found
		{"status of no flow", []string{"status", "nosuch"}, nil, nil, exitcode.NotFound, "nosuch"},
		{"events of no flow", []string{"events", "nosuch"}, nil, nil, exitcode.NotFound, "no events for flow"},
		{"logs of no task", []string{"logs", id + "/nope"}, nil, nil, exitcode.NotFound, "has no task nope"},
		{"logs of no attempt", []string{"logs", id + "_t_9"}, nil, nil, exitcode.NotFound, "has no attempt"},
		{"report of no flow", []string{"report", "nosuch/t"}, nil, nil, exitcode.NotFound, "nosuch"},
		{"report not yet made", []string{"report", id + "/t"}, nil, nil, exitcode.NotFound, "has not reported yet"},
		{"diff not yet made", []string{"diff", id + "/t"}, nil, nil, exitcode.NotFound, "has not reported yet"},
		{"status --task of no task", []string{"status", id, "--task", "nope"}, nil, nil, exitcode.NotFound, "has no task nope"},
		{"cancel no flow", []string{"cancel", "nosuch"}, nil, nil, exitcode.NotFound, "nosuch"},
		{"watch no flow", []string{"watch", "nosuch"}, nil, nil, exitcode.NotFound, "nosuch"},
		{"resolve no flow", []string{"runtime", "resolve", "--flow", "nosuch"}, nil, nil, exitcode.NotFound, "nosuch"},
		// 4: unreachable
		{"nothing listens", []string{"status", "--nats-url", closed}, nil, nil, exitcode.Unreachable, "is unreachable"},
		{"no controller on NATS", []string{"status", "--nats-url", noController}, nil, nil, exitcode.Unreachable, "no controller is answering"},
		{"no controller's bucket", []string{"workers", "--nats-url", noController}, nil, nil, exitcode.Unreachable, "bucket not found"},
		{"no controller's stream", []string{"events", "f", "--nats-url", noController}, nil, nil, exitcode.Unreachable, "stream not found"},
		// 6: no live worker serves what the flow needs (the test has no workers)
		{"submit --strict", []string{"submit", "--strict", "-"}, nil,
			strings.NewReader("name: s\nrepo: /r\nruntime: demo\ntasks:\n  - {id: a, prompt: x, retry: {fallback: [codex]}}\n"), exitcode.NoWorker,
			"<stdin>: refused (--strict): no live worker serves codex in pool default: no worker is live in the pool (needed as a fallback of task a)"},
		// 5: busy
		{"serve on a live data dir", []string{"serve", "--nats-listen", "127.0.0.1:-1"}, nil, nil, exitcode.Busy, "data dir " + c.dir + " is in use by pid"},
		// 1: failed
		{"credentials refused", []string{"status", "--nats-url", authNATS}, nil, nil, exitcode.Failed, "authorization violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append(append([]string{}, tc.args...), dd...)
			if tc.args[0] == "dev" || (tc.args[0] == "serve" && tc.code != exitcode.Busy) {
				args = tc.args // a data dir of their own
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			r := cli(t, ctx, tc.stdin, nil, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
			}
			if d := time.Since(began); d > 20*time.Second {
				t.Errorf("%v took %s", tc.args, d)
			}
		})
	}

	// A signal while a command waits: 130, and "interrupted".
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	if r := cli(t, ctx, nil, nil, "watch", id, "--data-dir", c.dir); r.code != exitcode.Interrupted || !strings.Contains(r.stderr, "interrupted") {
		t.Errorf("watch interrupted: exit %d, %q", r.code, r.stderr)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestSecondControllerRefused: serve and dev on a data dir a controller
// owns are refused, touch nothing, and the first goes on answering.
func TestSecondControllerRefused(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c := startController(t)
	urlFile := filepath.Join(c.dir, "nats.url")
	before, _ := os.ReadFile(urlFile)
	for _, args := range [][]string{
		{"serve", "--data-dir", c.dir, "--nats-listen", "127.0.0.1:-1"},
		{"dev", "--data-dir", c.dir, "--nats-listen", "127.0.0.1:-1", "--workers", "1"},
	} {
		r := cli(t, context.Background(), nil, nil, args...)
		if r.code != exitcode.Busy || !strings.Contains(r.stderr, "data dir "+c.dir+" is in use by pid "+fmt.Sprint(os.Getpid())) ||
			!strings.Contains(r.stderr, "(controller serve --data-dir="+c.dir+" --log-level=error --nats-listen=127.0.0.1:-1)") {
			t.Errorf("%s: exit %d, %q", args[0], r.code, r.stderr)
		}
		if after, _ := os.ReadFile(urlFile); !bytes.Equal(before, after) {
			t.Errorf("%s changed nats.url: %q -> %q", args[0], before, after)
		}
		if _, err := os.Stat(filepath.Join(c.dir, "worker-1")); err == nil {
			t.Errorf("%s created a worker dir", args[0])
		}
	}
	if r := cli(t, context.Background(), nil, nil, "status", "--data-dir", c.dir); r.code != 0 {
		t.Errorf("the first controller stopped answering: %d %s", r.code, r.stderr)
	}
}

// TestReadCommandsEscape: commands that read NATS directly — events, logs,
// workers, runtime list and health — show what others wrote there escaped
// on a terminal; logs keeps the bytes to a pipe and with --raw.
func TestReadCommandsEscape(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c := startController(t)
	id := c.submit(t, "say \x1b]52;c;aGk=\x07")
	js := c.js(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dd := []string{"--data-dir", c.dir}

	// Agent output on the attempt's OUTPUT subject.
	attempt := id + "_t_1"
	ev, err := event.New("chunk-1", event.RuntimeOutputChunk, time.Now(), id, "t", attempt, 1, event.OutputChunkData{Stream: "stdout", Text: "out: " + hostile + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := ev.Encode()
	if _, err := js.Publish(ctx, queue.OutputSubject(id, attempt), data); err != nil {
		t.Fatal(err)
	}
	waitAttempt := time.Now().Add(30 * time.Second)
	for cli(t, ctx, nil, nil, append([]string{"logs", id + "/t"}, dd...)...).code != 0 && time.Now().Before(waitAttempt) {
		time.Sleep(100 * time.Millisecond)
	}
	var term fakeTerminal
	if r := cli(t, ctx, nil, &term, append([]string{"logs", id + "/t"}, dd...)...); r.code != 0 {
		t.Fatalf("logs: %d %s", r.code, r.stderr)
	}
	// JSON strings carry valid UTF-8: the lone bytes arrive as U+FFFD.
	shown := strings.ReplaceAll(hostileShown, `\x9b\xff`, "\uFFFD\uFFFD")
	assertShown(t, "logs", term.String(), shown)
	if r := cli(t, ctx, nil, nil, append([]string{"logs", id + "/t"}, dd...)...); !strings.Contains(r.stdout, "\x1b]52;c;aGk=\a") {
		t.Errorf("logs to a pipe lost the bytes: %q", r.stdout)
	}
	term.Reset()
	if r := cli(t, ctx, nil, &term, append([]string{"logs", id + "/t", "--raw"}, dd...)...); r.code != 0 || !strings.Contains(term.String(), "\x1b]52;c;aGk=\a") {
		t.Errorf("logs --raw on a terminal: %q", term.String())
	}

	// An event with a hostile type and task on the flow's subject.
	bad, _ := event.New("bad-1", event.Type(hostile), time.Now(), id, hostile, "", 0, nil)
	data, _ = bad.Encode()
	if _, err := js.Publish(ctx, queue.EventSubject(id, "junk"), data); err != nil {
		t.Fatal(err)
	}
	term.Reset()
	if r := cli(t, ctx, nil, &term, append([]string{"events", id}, dd...)...); r.code != 0 {
		t.Fatalf("events: %d %s", r.code, r.stderr)
	}
	assertShown(t, "events", term.String(), shown)

	// A registration written by a forger with a worker credential.
	if err := fleet.Register(ctx, js, &fleet.Registration{ID: "w1", Host: hostile, Pool: "default", Seen: time.Now(), NotClaiming: hostile,
		Runtimes: []fleet.RuntimeHealth{{Name: "demo", Healthy: true, Version: hostile}, {Name: "x", Error: hostile}}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"workers"}, {"runtime", "list"}, {"runtime", "health"}} {
		term.Reset()
		if r := cli(t, ctx, nil, &term, append(args, dd...)...); r.code != 0 {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
		assertShown(t, strings.Join(args, " "), term.String(), shown)
	}

	// status --task shows the prompt, written in the flow file as "\e]52...".
	term.Reset()
	if r := cli(t, ctx, nil, &term, append([]string{"status", id, "--task", "t"}, dd...)...); r.code != 0 {
		t.Fatalf("status --task: %d %s", r.code, r.stderr)
	}
	if out := term.String(); strings.ContainsAny(out, "\x1b\a") || !strings.Contains(out, `say \x1b]52;c;aGk=\a`) {
		t.Errorf("status --task on a terminal: %q", out)
	}
}

// TestStatusPages: status FLOW shows a page and the command for the next,
// which shows the next; --all -o json holds every task; bad paging flags
// are usage errors.
func TestStatusPages(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c := startController(t)
	file := filepath.Join(t.TempDir(), "flow.yaml")
	body := fmt.Sprintf("name: paged\nrepo: %s\nruntime: demo\ntasks:\n", t.TempDir())
	for i := range 7 {
		body += fmt.Sprintf("  - id: t%d\n    prompt: p\n", i)
	}
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := cli(t, ctx, nil, nil, "submit", file, "--data-dir", c.dir)
	if r.code != 0 {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	id := strings.Fields(strings.TrimPrefix(r.stdout, "submitted flow "))[0]
	rowsOf := func(out string) (rows []string) {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "t") && len(f[0]) == 2 {
				rows = append(rows, f[0])
			}
		}
		return rows
	}
	r = cli(t, ctx, nil, nil, "status", id, "--limit", "3", "--data-dir", c.dir)
	next := "controller status " + id + " --after " + id + "/t2"
	if r.code != 0 || !strings.Contains(r.stdout, "shown: 1–3 of 7 tasks; 4 more: "+next+" (or --all)") ||
		!slices.Equal(rowsOf(r.stdout), []string{"t0", "t1", "t2"}) || !strings.Contains(r.stdout, "tasks: 7: ") {
		t.Fatalf("status --limit 3: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The command it printed, as an operator would run it.
	args := append(strings.Fields(strings.TrimPrefix(next, "controller ")), "--limit", "3", "--data-dir", c.dir)
	r = cli(t, ctx, nil, nil, args...)
	if r.code != 0 || !slices.Equal(rowsOf(r.stdout), []string{"t3", "t4", "t5"}) || !strings.Contains(r.stdout, "shown: 4–6 of 7 tasks; 1 more") {
		t.Fatalf("the next page: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, ctx, nil, nil, "status", id, "--limit", "2", "--all", "-o", "json", "--data-dir", c.dir)
	var all controller.StatusResponse
	if err := json.Unmarshal([]byte(r.stdout), &all); r.code != 0 || err != nil || len(all.Detail.Tasks) != 7 ||
		all.Detail.Page.Next != "" || len(all.Detail.Flow.Spec.Tasks) != 7 {
		t.Fatalf("status --all -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	r = cli(t, ctx, nil, nil, "status", id, "--state", "scheduled,pending", "--data-dir", c.dir)
	if r.code != 0 || len(rowsOf(r.stdout)) != 7 {
		t.Fatalf("status --state: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, ctx, nil, nil, "status", id, "--task", "t4", "--data-dir", c.dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "task t4 of flow "+id) {
		t.Fatalf("status --task: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", id, "--state", "broken"}, exitcode.Usage, `states: "broken" is not a task state`},
		{[]string{"status", id, "--limit", "-1"}, exitcode.Usage, "--limit must be 0 (every task) or more"},
		{[]string{"status", id, "--limit", "5000"}, exitcode.Usage, "limit: 5000; a page holds 1 to 1000 tasks"},
		{[]string{"status", id, "--after", "other-abc123/t1"}, exitcode.Usage, "is a cursor of flow other-abc123, not of " + id},
		{[]string{"status", id, "--after", id + "/t9"}, exitcode.Usage, "flow " + id + " has no task t9"},
		{[]string{"status", "--limit", "5"}, exitcode.Usage, "need a FLOW argument"},
		{[]string{"status", id, "--task", "t9"}, exitcode.NotFound, "has no task t9"},
	} {
		r := cli(t, ctx, nil, nil, append(tc.args, "--data-dir", c.dir)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
