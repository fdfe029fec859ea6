package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDenials(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "work/wt/f", "work/tmp/")
	wt := filepath.Join(root, "work/wt")
	c := compileOnly(t, Policy{
		Own:     []Grant{{Path: wt, Write: true}, {Path: filepath.Join(root, "work/tmp"), Write: true}},
		Connect: []uint16{443},
	})
	if err := os.Symlink("/etc/hosts", filepath.Join(wt, "link-out")); err != nil {
		t.Fatal(err)
	}
	d := c.Denials(wt)
	out := strings.Join([]string{
		"/bin/sh: 1: cannot create ../escape.txt: Permission denied",
		"/bin/sh: 9: cannot create link-out: Permission denied", // a symlink in the worktree, to outside
		"touch: cannot touch '/etc/drover-x': Permission denied",
		"touch: cannot touch '" + wt + "/mode-bits': Permission denied", // inside what it may write: not the sandbox
		`{"type":"user","message":{"content":[{"type":"tool_result","content":"mkdir: cannot create directory \u2018/srv/x\u2019: Permission denied\nError: EACCES: permission denied, open '/root/.ssh/id_rsa'"}]}}`,
		`{"tool":"Bash","output":"error: could not lock config file \"` + root + `/work/repos/a.git/config\": Permission denied"}`,
		"fatal: Unable to create '" + root + "/work/repos/a.git/index.lock': Operation not permitted",
		"PermissionError: [Errno 13] Permission denied: '/var/lib/drover/worker.creds'",
		"curl: (7) Failed to connect to 127.0.0.1 port 4222 after 0 ms: Permission denied",
		"Error: connect EACCES 10.0.0.1:5432",
		"bash: line 1: /dev/tcp/127.0.0.1/6222: Permission denied",
		"dial tcp 127.0.0.1:443: connect: permission denied", // 443 is allowed: not the sandbox
		"Permission denied (publickey).",                     // no path, no port
		"cat: /etc/drover-x: Permission denied",              // seen already
		"everything fine, nothing denied here: /etc/passwd",
	}, "\n")
	// Fed in awkward chunks, on two streams, the last line unfinished.
	for i := 0; i < len(out); i += 7 {
		d.Write(1, []byte(out[i:min(i+7, len(out))]))
	}
	d.Write(2, []byte("rm: cannot remove '/usr/bin/git': Operation not permitted"))
	got := d.List()
	var what []string
	for _, g := range got {
		what = append(what, strings.SplitN(g, ": ", 2)[0])
	}
	want := []string{
		filepath.Join(root, "work/escape.txt"), filepath.Join(wt, "link-out"), "/etc/drover-x", "/srv/x", "/root/.ssh/id_rsa",
		filepath.Join(root, "work/repos/a.git/config"), filepath.Join(root, "work/repos/a.git/index.lock"),
		"/var/lib/drover/worker.creds", "tcp/4222", "tcp/5432", "tcp/6222", "/usr/bin/git",
	}
	if !slices.Equal(what, want) {
		t.Errorf("denied:\n got %q\nwant %q\n%s", what, want, strings.Join(got, "\n"))
	}
	if !strings.Contains(got[0], "cannot create ../escape.txt: Permission denied") {
		t.Errorf("the line is not kept: %q", got[0])
	}
}

func TestDenialsBounded(t *testing.T) {
	c := compileOnly(t, Policy{})
	d := c.Denials("/")
	long := strings.Repeat("x", 10000)
	for i := range 200 {
		d.Write(1, []byte("touch: cannot touch '/srv/"+string(rune('a'+i%26))+strings.Repeat("y", i)+"': Permission denied "+long+"\n"))
	}
	got := d.List()
	if len(got) != maxDenials+1 || !strings.HasPrefix(got[maxDenials], "… and 150 more") {
		t.Fatalf("%d entries, last %q", len(got), got[len(got)-1])
	}
	for _, g := range got[:maxDenials] {
		if len(g) > maxDenialLine+300 {
			t.Fatalf("entry of %d bytes", len(g))
		}
	}
	// Control characters never reach a terminal.
	d3 := c.Denials("/")
	d3.Write(1, []byte("touch: cannot touch '/srv/\x1b[2Jx': Permission denied \x07\xff\n"))
	if got := d3.List(); len(got) != 1 || strings.ContainsAny(got[0], "\x1b\x07") || !utf8.ValidString(got[0]) {
		t.Errorf("%q", got)
	}
	// A line longer than the buffer is read in pieces, not kept whole.
	d2 := c.Denials("/")
	d2.Write(1, []byte(strings.Repeat("z", 3*maxLine)+" cannot touch '/srv/q': Permission denied"))
	if got := d2.List(); len(got) != 1 {
		t.Errorf("overlong line: %q", got)
	}
}

func FuzzDenials(f *testing.F) {
	f.Add([]byte("touch: cannot touch '/etc/x': Permission denied\n"), "/w")
	f.Add([]byte(`{"c":"\"/a\\\"b\": EACCES\n"}`), "")
	f.Add([]byte("connect EACCES [::1]:99999 port 0 'x' \"../../\" `/`"), "/")
	root := f.TempDir()
	sb := &Sandbox{support: Support{ABI: MinABI}}
	c, err := sb.Compile(Policy{Own: []Grant{{Path: root, Write: true}}, Connect: []uint16{443}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`), "/")
	f.Add([]byte("Cannot connect to API http://[::1]:41234/v1 port 9 localhost:7 1.2.3.4:5"), "/")
	f.Fuzz(func(t *testing.T, out []byte, dir string) {
		d := c.Denials(dir)
		d.SetEndpoints([]Endpoint{{Addr: "127.0.0.1:41234", Port: 41234, Source: "s"}})
		d.Write(1, out)
		// Line by line too, as the CLI's own words: what it counts is
		// what List says, and never a port the confinement allows.
		for l := range bytes.Lines(out) {
			heard := d.Line(l, true)
			if s, ok := d.Stuck(); heard == HeardRefusal && (!ok || s.Times < 1) {
				t.Fatalf("refusal %q not counted: %+v", l, s)
			}
		}
		if s, ok := d.Stuck(); ok {
			if p, isPort := strings.CutPrefix(s.What, "tcp/"); isPort {
				if n, err := strconv.Atoi(p); err != nil || c.ConnectAllowed(uint16(n)) {
					t.Fatalf("stuck on an allowed port: %+v", s)
				}
			}
		}
		for _, l := range d.List() {
			if len(l) > maxLine+maxDenialLine+64 {
				t.Fatalf("entry of %d bytes", len(l))
			}
			if !utf8.ValidString(l) || strings.ContainsAny(l, "\x1b\r") {
				t.Fatalf("unprintable entry %q", l)
			}
			what := strings.SplitN(l, ": ", 2)[0]
			if strings.HasPrefix(what, "/") && c.Writable(what) {
				t.Fatalf("%q is writable, reported as denied", what)
			}
		}
	})
}

// A connection to a port the sandbox refuses, in the words the CLIs use
// (testdata/transcripts/*/sandbox-denied): a port the line names counts
// wherever it comes from; a failure that names none counts on the
// endpoints the process is configured to reach that the sandbox refuses,
// and only when the line is the process's own word. Nothing counts for a
// port the sandbox allows: that failure is the network's.
func TestDenialsConnectionFailures(t *testing.T) {
	c := compileOnly(t, Policy{Connect: []uint16{443}})
	eps := []Endpoint{
		{Addr: "127.0.0.1:41234", Port: 41234, Source: "model_providers.mock.base_url in /h/.codex/config.toml"},
		{Addr: "api.example.com:443", Port: 443, Source: "allowed"},
	}
	codex := `{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`
	pi := `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"Connection error."}`
	kilo := "\x1b[91m\x1b[1mError: \x1b[0mCannot connect to API: Was there a typo in the url or port?"
	opencode := `{"type":"error","error":{"name":"APIError","data":{"message":"Cannot connect to API: Was there a typo in the url or port?","isRetryable":true,"metadata":{"url":"http://127.0.0.1:41234/v1/chat/completions"}}}}`
	for _, c2 := range []struct {
		name      string
		line      string
		own       bool
		endpoints bool
		what      string // "" = nothing recorded
		addr      string
	}{
		{"codex, own", codex, true, true, "tcp/41234", "127.0.0.1:41234"},
		{"pi, own", pi, true, true, "tcp/41234", "127.0.0.1:41234"},
		{"kilo's stderr, own", kilo, true, true, "tcp/41234", "127.0.0.1:41234"},
		{"codex, relayed", codex, false, true, "", ""},
		{"codex, no endpoint known", codex, true, false, "", ""},
		{"opencode names the URL", opencode, false, false, "tcp/41234", "127.0.0.1:41234"},
		{"curl names the port", "curl: (7) Failed to connect to 127.0.0.1 port 41234 after 0 ms: Couldn't connect to server", false, false, "tcp/41234", "127.0.0.1:41234"},
		{"an allowed port: the network", `{"message":"Cannot connect to API","url":"https://api.example.com:443/v1"}`, true, true, "", ""},
		{"an allowed port by name", "Failed to connect to api.example.com port 443: Connection refused", true, true, "", ""},
		{"no failure", `{"type":"turn.started"}`, true, true, "", ""},
		{"a denial naming nothing", "bash: connect: Permission denied", true, true, "", ""},
		{"a host named by IPv6", "fetch failed: connect to http://[::1]:5432/db", false, false, "tcp/5432", "[::1]:5432"},
	} {
		d := c.Denials("/w")
		if c2.endpoints {
			d.SetEndpoints(eps)
		}
		got := d.Line([]byte(c2.line), c2.own) == HeardRefusal
		s, stuck := d.Stuck()
		if got != (c2.what != "") || stuck != got || s.What != c2.what || s.Addr != c2.addr {
			t.Errorf("%s: Line = %v, Stuck = %+v %v; want %q at %q", c2.name, got, s, stuck, c2.what, c2.addr)
		}
		if wantSource := c2.what != "" && c2.endpoints; wantSource != (s.Source != "") {
			t.Errorf("%s: source %q", c2.name, s.Source)
		}
	}
}

// Stuck is what was refused most since the last progress, and when that
// began: a process refused once, or refused and then going on, is not
// stuck on it.
func TestDenialsStuck(t *testing.T) {
	c := compileOnly(t, Policy{Connect: []uint16{443}})
	d := c.Denials("/w")
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.SetClock(func() time.Time { return clock })
	tick := func(dt time.Duration) { clock = clock.Add(dt) }
	refuse := func(port int) {
		if d.Line(fmt.Appendf(nil, "Error: connect EACCES 127.0.0.1:%d", port), true) != HeardRefusal {
			t.Fatalf("port %d: not recorded", port)
		}
	}
	if _, ok := d.Stuck(); ok {
		t.Fatal("stuck before anything")
	}
	refuse(5432)
	if s, _ := d.Stuck(); !s.After.IsZero() {
		t.Fatalf("progress before any: %v", s.After)
	}
	tick(time.Second)
	refuse(6379)
	tick(time.Second)
	refuse(6379)
	s, ok := d.Stuck()
	if !ok || s.What != "tcp/6379" || s.Times != 2 || !s.Since.Equal(clock.Add(-time.Second)) {
		t.Fatalf("stuck %+v %v", s, ok)
	}
	// Progress: a new streak from the next refusal.
	d.Progress()
	if s, ok := d.Stuck(); ok {
		t.Fatalf("stuck after progress: %+v", s)
	}
	tick(time.Minute)
	refuse(5432)
	s, ok = d.Stuck()
	if !ok || s.What != "tcp/5432" || s.Times != 1 || !s.Since.Equal(clock) || !s.After.Equal(clock.Add(-time.Minute)) {
		t.Fatalf("after progress: %+v %v", s, ok)
	}
	// Equal counts: the earliest streak.
	tick(time.Second)
	refuse(6379)
	if s, _ := d.Stuck(); s.What != "tcp/5432" {
		t.Errorf("a tie went to %s", s.What)
	}
	// The report counts them all.
	list := d.List()
	if len(list) != 2 || !strings.HasSuffix(list[0], "(refused 2 times)") || !strings.HasSuffix(list[1], "(refused 3 times)") {
		t.Errorf("list %q", list)
	}
}

// A flood costs no memory: of one target, a count; of ever new ones, the
// first maxDenials and a count.
func TestDenialsFlood(t *testing.T) {
	c := compileOnly(t, Policy{})
	d := c.Denials("/")
	for i := range 3000 {
		d.Line(fmt.Appendf(nil, "touch: cannot touch '/srv/%d': Permission denied", i), true)
		d.Line([]byte("Error: connect EACCES 127.0.0.1:7"), true)
	}
	if len(d.byWhat) != maxDenials || len(d.list) != maxDenials {
		t.Fatalf("%d targets kept", len(d.byWhat))
	}
	got := d.List()
	if last := got[len(got)-1]; last != "… and 2951 more refusals of other targets" {
		t.Errorf("last entry %q", last)
	}
	if !strings.HasSuffix(got[1], "(refused 3000 times)") {
		t.Errorf("the repeated target: %q", got[1])
	}
}

// BenchmarkDenials: what reading a CLI's output for denials costs per
// line: an ordinary JSON line (no word of a denial: the common case), a
// refusal of one target again and again (a flood), and a connection
// failure put on a configured endpoint.
func BenchmarkDenials(b *testing.B) {
	sb := &Sandbox{support: Support{ABI: MinABI}}
	c, err := sb.Compile(Policy{Connect: []uint16{443}})
	if err != nil {
		b.Fatal(err)
	}
	for name, line := range map[string]string{
		"ordinary": `{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"I updated the handler and ran the tests; all pass."}}`,
		"refusal":  "bash: line 1: /dev/tcp/127.0.0.1/5432: Permission denied",
		"endpoint": `{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`,
	} {
		b.Run(name, func(b *testing.B) {
			d := c.Denials("/w")
			d.SetEndpoints([]Endpoint{{Addr: "127.0.0.1:41234", Port: 41234}})
			l := []byte(line)
			b.SetBytes(int64(len(l)))
			for b.Loop() {
				d.Line(l, true)
			}
		})
	}
}
