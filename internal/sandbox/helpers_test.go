package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary, started confined, perform one action
// (its arguments follow) and print "ok" or "denied: ERR" or "error: ERR".
const helperEnv = "SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	Main() // a no-op unless started as the re-exec step (package stub's init runs it first)
	if action := os.Getenv(helperEnv); action != "" {
		os.Exit(helper(action, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(action string, args []string) int {
	err := helperAction(action, args)
	switch {
	case err == nil:
		fmt.Println("ok")
	// Landlock refuses to move or link a file across directories with
	// EXDEV, so that programs fall back to copying (which it then denies).
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EXDEV):
		fmt.Println("denied:", err)
	default:
		fmt.Println("error:", err)
	}
	return 0
}

func helperAction(action string, args []string) error {
	switch action {
	case "write":
		return os.WriteFile(args[0], []byte("escaped\n"), 0o644)
	case "append":
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("escaped\n")
		return err
	case "read":
		_, err := os.ReadFile(args[0])
		return err
	case "list":
		_, err := os.ReadDir(args[0])
		return err
	case "mkdir":
		return os.Mkdir(args[0], 0o755)
	case "remove":
		return os.Remove(args[0])
	case "rename":
		return os.Rename(args[0], args[1])
	case "truncate":
		return os.Truncate(args[0], 0)
	case "symlink-write": // a symlink made where it may write, written through
		if err := os.Symlink(args[1], args[0]); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		return os.WriteFile(args[0], []byte("escaped\n"), 0o644)
	case "hardlink":
		return os.Link(args[0], args[1])
	case "exec":
		return exec.Command(args[0], args[1:]...).Run()
	case "dial":
		c, err := net.Dial("tcp", args[0])
		if err == nil {
			c.Close()
		}
		return err
	case "dial-mptcp": // Multipath TCP: Landlock limits TCP only
		var d net.Dialer
		d.SetMultipathTCP(true)
		c, err := d.Dial("tcp", args[0])
		if err == nil {
			mp, _ := c.(*net.TCPConn).MultipathTCP()
			c.Close()
			if !mp {
				return fmt.Errorf("%w: fell back to TCP", syscall.EPROTONOSUPPORT)
			}
		}
		return err
	case "listen":
		l, err := net.Listen("tcp4", args[0])
		if err == nil {
			l.Close()
		}
		return err
	case "signal":
		pid, _ := strconv.Atoi(args[0])
		return syscall.Kill(pid, 0)
	case "self": // what the process was started with: argv, env, open fds
		var fds []string
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			t, _ := os.Readlink("/proc/self/fd/" + e.Name())
			fds = append(fds, e.Name()+"="+t)
		}
		fmt.Printf("argv=%q\nenv=%q\nfds=%q\n", os.Args, os.Environ(), fds)
		return nil
	case "lift": // try to undo the sandbox, then write args[0]
		return lift(args[0])
	case "child-write": // a child of the confined process writes
		out, err := exec.Command("/bin/sh", "-c", "echo escaped > "+args[0]).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", syscall.EACCES, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return fmt.Errorf("unknown action %q", action)
}

// lift tries the ways a process has to get out, and writes path after
// each: clear no_new_privs; enforce a ruleset granting every write
// (rulesets only stack: what is allowed is what every layer allows); start
// the re-exec step again with such a ruleset, whose child writes. It
// returns nil if any write got through, else the last write's error.
func lift(path string) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil {
		return nil // cleared: that alone is a way out of setuid limits
	}
	cfg := landlock.Config{HandledAccessFS: ll.AccessFSWriteFile | ll.AccessFSMakeReg}
	everything := landlock.PathAccess(ll.AccessFSWriteFile|ll.AccessFSMakeReg, "/")
	fd, _, err := cfg.NewRulesetFD(everything)
	if err != nil {
		return fmt.Errorf("ruleset: %v", err)
	}
	step := exec.Command("/proc/self/exe")
	step.Args = []string{"drover-sandbox-exec", "/bin/sh", "sh", "-c", "echo escaped > " + path}
	step.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "ruleset")}
	out, stepErr := step.CombinedOutput()
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	runtime.LockOSThread()
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("restrict: %v", err)
	}
	if err := os.WriteFile(path, []byte("escaped\n"), 0o644); err != nil {
		return fmt.Errorf("%w (the step's child: %v: %s)", err, stepErr, strings.TrimSpace(string(out)))
	}
	return nil
}

// confined runs the helper action confined by c and returns its answer.
func confined(t *testing.T, c *Confinement, action string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+action)
	done, err := c.Cmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	done()
	if err != nil {
		t.Fatalf("helper %s %v: %v\n%s", action, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// mustSandbox is a sandbox of this kernel, or a skip where it has too
// little Landlock to confine.
func mustSandbox(t testing.TB) *Sandbox {
	t.Helper()
	sb, err := New(Probe())
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	return sb
}

// compile is Compile of a policy that can run the test binary.
func compile(t *testing.T, sb *Sandbox, p Policy) *Confinement {
	t.Helper()
	p.Exec = os.Args[0]
	c, err := sb.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tree makes files (and their directories) under root; a name ending in
// "/" is an empty directory.
func tree(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdirAll(p string) error { return os.MkdirAll(p, 0o755) }
