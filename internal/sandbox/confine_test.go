package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"
)

// escapeBox is a worker's work dir as an attempt sees it: its own worktree
// and TMPDIR, other attempts' worktrees, a repo cache, a secret.
type escapeBox struct {
	root, wt, tmp, other, cache, secret, worker string
	c                                           *Confinement
}

func newEscapeBox(t *testing.T, sb *Sandbox) *escapeBox {
	t.Helper()
	root := t.TempDir()
	b := &escapeBox{root: root}
	p := func(rel string) string { return filepath.Join(root, rel) }
	tree(t, root, "work/worktrees/mine/README.md", "work/worktrees/mine/out.txt", "work/worktrees/other/README.md", "work/tmp/mine/",
		"work/repos/a.git/config", "work/repos/a.git/objects/pack/p.pack", "conf/worker.creds", "conf/public.txt",
		"worker-home/.bashrc")
	b.wt, b.tmp, b.other = p("work/worktrees/mine"), p("work/tmp/mine"), p("work/worktrees/other")
	b.cache, b.secret, b.worker = p("work/repos/a.git"), p("conf/worker.creds"), p("worker-home")
	b.c = compile(t, sb, Policy{
		Own: []Grant{{Path: b.wt, Write: true}, {Path: b.tmp, Write: true}, {Path: filepath.Join(b.cache, "objects")}},
		// A runtime that asks for the directory the worker's secret is in.
		Extra: []Grant{{Path: p("conf")}},
		Deny:  []string{p("work"), b.secret},
		PATH:  []string{"/usr/bin", "/bin"},
	})
	return b
}

func TestConfinedFiles(t *testing.T) {
	sb := mustSandbox(t)
	b := newEscapeBox(t, sb)
	rel, err := filepath.Rel(b.wt, b.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		action  string
		args    []string
		ok      bool
		mustNot string // a path that must not exist afterwards
	}{
		{"write in the worktree", "write", []string{filepath.Join(b.wt, "new.txt")}, true, ""},
		{"mkdir in TMPDIR", "mkdir", []string{filepath.Join(b.tmp, "d")}, true, ""},
		{"rename within the worktree", "rename", []string{filepath.Join(b.wt, "README.md"), filepath.Join(b.wt, "moved.md")}, true, ""},
		{"read the repo's objects", "read", []string{filepath.Join(b.cache, "objects/pack/p.pack")}, true, ""},
		{"read a sibling of the secret", "read", []string{filepath.Join(b.root, "conf/public.txt")}, true, ""},
		{"read a system file", "read", []string{"/etc/hosts"}, true, ""},

		{"write the worktree's parent", "write", []string{filepath.Join(b.wt, "../escape.txt")}, false, filepath.Join(b.wt, "../escape.txt")},
		{"write two levels up, relative", "write", []string{filepath.Join(b.wt, "../../escape.txt")}, false, filepath.Join(b.root, "work/escape.txt")},
		{"write the root, relative", "write", []string{filepath.Join(b.wt, rel, "escape.txt")}, false, filepath.Join(b.root, "escape.txt")},
		{"write another worktree", "write", []string{filepath.Join(b.other, "pwned.txt")}, false, filepath.Join(b.other, "pwned.txt")},
		{"write the cache's config", "append", []string{filepath.Join(b.cache, "config")}, false, ""},
		{"write the cache's objects", "write", []string{filepath.Join(b.cache, "objects/pack/evil")}, false, filepath.Join(b.cache, "objects/pack/evil")},
		{"truncate a readable file", "truncate", []string{filepath.Join(b.cache, "objects/pack/p.pack")}, false, ""},
		{"write /tmp", "write", []string{filepath.Join(os.TempDir(), fmt.Sprintf("drover-escape-%d", os.Getpid()))}, false, filepath.Join(os.TempDir(), fmt.Sprintf("drover-escape-%d", os.Getpid()))},
		{"write the worker's HOME", "write", []string{filepath.Join(b.worker, ".bashrc")}, false, ""},
		{"write /etc", "write", []string{"/etc/drover-escape"}, false, "/etc/drover-escape"},
		{"read the secret", "read", []string{b.secret}, false, ""},
		{"list the secret's directory", "list", []string{filepath.Join(b.root, "conf")}, false, ""},
		{"read another worktree", "read", []string{filepath.Join(b.other, "README.md")}, false, ""},
		{"read the cache's config", "read", []string{filepath.Join(b.cache, "config")}, false, ""},
		{"read the worker's HOME", "read", []string{filepath.Join(b.worker, ".bashrc")}, false, ""},
		{"rename out of the worktree", "rename", []string{filepath.Join(b.wt, "out.txt"), filepath.Join(b.other, "stolen.md")}, false, filepath.Join(b.other, "stolen.md")},
		{"hard link a secret in", "hardlink", []string{b.secret, filepath.Join(b.wt, "creds")}, false, filepath.Join(b.wt, "creds")},
		{"symlink out and write through it", "symlink-write", []string{filepath.Join(b.wt, "link"), filepath.Join(b.other, "via-link.txt")}, false, filepath.Join(b.other, "via-link.txt")},
		{"a child writes outside", "child-write", []string{filepath.Join(b.other, "child.txt")}, false, filepath.Join(b.other, "child.txt")},
		{"lift the sandbox, then write", "lift", []string{filepath.Join(b.other, "lifted.txt")}, false, filepath.Join(b.other, "lifted.txt")},
		{"run a program from a denied dir", "exec", []string{filepath.Join(b.other, "README.md")}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := confined(t, b.c, tc.action, tc.args...)
			if tc.ok && got != "ok" || !tc.ok && !strings.HasPrefix(got, "denied:") {
				t.Errorf("%s %v: %s, want %s", tc.action, tc.args, got, map[bool]string{true: "ok", false: "denied"}[tc.ok])
			}
			if tc.mustNot != "" {
				if _, err := os.Lstat(tc.mustNot); err == nil {
					t.Errorf("%s exists", tc.mustNot)
				}
			}
		})
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(b.cache, "config")); err != nil || strings.Contains(string(b), "escaped") {
			t.Errorf("the cache's config changed: %q %v", b, err)
		}
	})
}

func TestConfinedNetwork(t *testing.T) {
	sb := mustSandbox(t)
	listen := func() (net.Listener, string) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return l, l.Addr().String()
	}
	allowed, allowedAddr := listen()
	_, deniedAddr := listen()
	c := compile(t, sb, Policy{Connect: []uint16{uint16(allowed.Addr().(*net.TCPAddr).Port)}})
	if got := confined(t, c, "dial", allowedAddr); got != "ok" {
		t.Errorf("dial an allowed port: %s", got)
	}
	if got := confined(t, c, "dial", deniedAddr); !strings.HasPrefix(got, "denied:") {
		t.Errorf("dial a port not allowed: %s", got)
	}
	t.Logf("mptcp: %s", confined(t, c, "dial-mptcp", deniedAddr))
	if got := confined(t, c, "listen", "127.0.0.1:0"); !strings.HasPrefix(got, "denied:") {
		t.Errorf("listen without a bind port: %s", got)
	}
	if got := confined(t, compile(t, sb, Policy{Bind: []uint16{0}}), "listen", "127.0.0.1:0"); got != "ok" {
		t.Errorf("listen on a port the kernel picks, with bind 0 allowed: %s", got)
	}
}

// TestConfinedCannotReachTheWorker: the confined process can neither
// signal the process that started it (ABI 6 scopes signals) nor read its
// environment, where a worker's NATS password may be.
func TestConfinedCannotReachTheWorker(t *testing.T) {
	sb := mustSandbox(t)
	c := compile(t, sb, Policy{})
	me := fmt.Sprint(os.Getpid())
	if got := confined(t, c, "read", "/proc/"+me+"/environ"); !strings.HasPrefix(got, "denied:") {
		t.Errorf("read the worker's environment: %s", got)
	}
	if got := confined(t, c, "read", "/proc/"+me+"/cmdline"); got != "ok" {
		t.Errorf("read the worker's cmdline (not protected by Landlock; docs/security.md says so): %s", got)
	}
	if sb.Support().ABI >= 6 {
		if got := confined(t, c, "signal", me); !strings.HasPrefix(got, "denied:") {
			t.Errorf("signal the worker: %s", got)
		}
	}
}

func TestStepFailures(t *testing.T) {
	sb := mustSandbox(t)
	c := compile(t, sb, Policy{})
	run := func(path string) (int, string) {
		cmd := exec.Command(path)
		done, err := c.Cmd(cmd)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		done()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run("/nonexistent/drover-cli"); code != 127 || !strings.Contains(out, "drover-sandbox-exec: exec /nonexistent/drover-cli") {
		t.Errorf("missing binary: exit %d %q", code, out)
	}
	// A binary the policy does not let it run.
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := exectest.WriteExecutable(bin, []byte("#!/bin/sh\necho ran\n")); err != nil {
		t.Fatal(err)
	}
	if code, out := run(bin); code != 126 || !strings.Contains(strings.ToLower(out), "permission denied") {
		t.Errorf("binary outside the policy: exit %d %q", code, out)
	}
	// Without a ruleset on descriptor 3 the step refuses to run anything.
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"drover-sandbox-exec", "/bin/true", "true"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 126 || !strings.Contains(string(out), "landlock_restrict_self") {
		t.Errorf("step without a ruleset: %v %q", err, out)
	}
}

// TestStepPassesEnvAndArgs: the CLI gets exactly its argv and environment;
// nothing of the step (its name, the ruleset's descriptor) reaches it.
func TestStepPassesEnvAndArgs(t *testing.T) {
	sb := mustSandbox(t)
	c := compile(t, sb, Policy{})
	cmd := exec.Command(os.Args[0], "arg 1", "")
	cmd.Args[0] = "the-cli"
	cmd.Env = []string{helperEnv + "=self", "DROVER_X=y z"}
	done, err := c.Cmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	done()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 3 || lines[0] != `argv=["the-cli" "arg 1" ""]` || lines[1] != `env=["SANDBOX_TEST_HELPER=self" "DROVER_X=y z"]` {
		t.Errorf("the CLI saw:\n%s", out)
	}
	for _, fd := range strings.Fields(strings.Trim(strings.TrimPrefix(lines[2], "fds="), "[]")) {
		if strings.Contains(fd, "landlock") {
			t.Errorf("the ruleset reached the CLI: %s", lines[2])
		}
	}
}

// TestConfinedRules checks each kind of rule on its own: a directory to
// read (and run from), one to write, a file to read, a file to write,
// device files.
func TestConfinedRules(t *testing.T) {
	sb := mustSandbox(t)
	root := t.TempDir()
	tree(t, root, "ro/data.txt", "rw/", "prompt.md", "state.json", "other.txt")
	p := func(rel string) string { return filepath.Join(root, rel) }
	tool := p("ro/tool.sh")
	if err := exectest.WriteExecutable(tool, []byte("#!/bin/sh\necho ran\n")); err != nil {
		t.Fatal(err)
	}
	c := compile(t, sb, Policy{
		Own: []Grant{{Path: p("ro")}, {Path: p("rw"), Write: true}, {Path: p("prompt.md")}, {Path: p("state.json"), Write: true}},
	})
	for _, tc := range []struct {
		action string
		args   []string
		ok     bool
	}{
		{"read", []string{p("ro/data.txt")}, true},
		{"list", []string{p("ro")}, true},
		{"exec", []string{tool}, true},
		{"write", []string{p("ro/new.txt")}, false},
		{"append", []string{p("ro/data.txt")}, false},
		{"write", []string{p("rw/new.txt")}, true},
		{"mkdir", []string{p("rw/sub")}, true},
		{"read", []string{p("prompt.md")}, true},
		{"append", []string{p("prompt.md")}, false},
		{"truncate", []string{p("prompt.md")}, false},
		{"append", []string{p("state.json")}, true},
		{"truncate", []string{p("state.json")}, true},
		{"read", []string{p("other.txt")}, false},
		{"write", []string{p("sibling.txt")}, false},
		{"append", []string{"/dev/null"}, true},
		{"read", []string{"/dev/null"}, true},
		{"read", []string{"/etc/hosts"}, true},
		{"append", []string{"/etc/hosts"}, false},
		{"list", []string{"/root"}, false},
	} {
		got := confined(t, c, tc.action, tc.args...)
		if tc.ok && got != "ok" || !tc.ok && !strings.HasPrefix(got, "denied:") {
			t.Errorf("%s %v: %s", tc.action, tc.args, got)
		}
	}
}
