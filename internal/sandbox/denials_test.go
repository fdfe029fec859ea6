package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	c, err := sb.Compile(Policy{Own: []Grant{{Path: root, Write: true}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, out []byte, dir string) {
		d := c.Denials(dir)
		d.Write(1, out)
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
