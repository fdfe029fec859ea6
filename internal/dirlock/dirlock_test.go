package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helper process: DIRLOCK_HELPER=hold locks DIRLOCK_DIR, prints
// "locked", and keeps the lock until its stdin closes or it is killed;
// DIRLOCK_HELPER=try tries once and prints what happened.
func TestMain(m *testing.M) {
	switch os.Getenv("DIRLOCK_HELPER") {
	case "hold":
		l, err := Acquire(os.Getenv("DIRLOCK_DIR"), "helper hold")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(5)
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = l.Release()
		os.Exit(0)
	case "try":
		_, err := Acquire(os.Getenv("DIRLOCK_DIR"), "helper try")
		if err != nil {
			fmt.Println(err)
			if errors.Is(err, ErrHeld) {
				os.Exit(5)
			}
			os.Exit(1)
		}
		fmt.Println("locked")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HELPER="+mode, "DIRLOCK_DIR="+dir)
	return cmd
}

// holdInChild starts a child that holds dir's lock and returns it once the
// lock is taken; closing its stdin releases, killing it drops the lock.
func holdInChild(t *testing.T, dir string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := helper(t, "hold", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child: %q, %v", line, err)
	}
	return cmd, func() { stdin.Close() }
}

func TestSecondLockInProcessRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "controller dev --data-dir "+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	before, _ := os.ReadFile(filepath.Join(dir, FileName))

	_, err = Acquire(dir, "controller serve")
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	if he.Holder.PID != os.Getpid() || he.Holder.Command != "controller dev --data-dir "+dir || he.Holder.Since.IsZero() {
		t.Errorf("holder %+v, want this process and the first command", he.Holder)
	}
	msg := err.Error()
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "controller dev", "running since"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, FileName))
	if string(before) != string(after) {
		t.Errorf("the refused Acquire changed the lock file:\n%s\n->\n%s", before, after)
	}
	if h, held := Read(dir); !held || h.PID != os.Getpid() {
		t.Errorf("Read = %+v, %t; want this process, held", h, held)
	}

	// Released, it can be taken again, and Release twice is harmless.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if _, held := Read(dir); held {
		t.Error("Read says held after Release")
	}
	l2, err := Acquire(dir, "again")
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l2.Release()
}

// TestChildProcessRefused: a lock held here refuses another process, which
// names this one.
func TestChildProcessRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "the parent")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	out, err := helper(t, "try", dir).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Fatalf("child: %v, %s; want refused (exit 5)", err, out)
	}
	if want := fmt.Sprintf("pid %d (the parent)", os.Getpid()); !strings.Contains(string(out), want) {
		t.Errorf("child said %q, want %q", out, want)
	}
}

// TestHeldByChild: a lock held by another process refuses this one; once
// that process is killed (no Release, the file still names it), the stale
// file is taken over.
func TestHeldByChild(t *testing.T) {
	dir := t.TempDir()
	child, _ := holdInChild(t, dir)
	_, err := Acquire(dir, "parent")
	var he *HeldError
	if !errors.As(err, &he) || he.Holder.PID != child.Process.Pid || he.Holder.Command != "helper hold" {
		t.Fatalf("Acquire while the child holds it: %v (%+v), want the child's pid %d", err, he, child.Process.Pid)
	}
	if h, held := Read(dir); !held || h.PID != child.Process.Pid {
		t.Errorf("Read = %+v, %t", h, held)
	}

	_ = child.Process.Kill()
	_ = child.Wait()
	if h, held := Read(dir); held || h.PID != child.Process.Pid {
		t.Errorf("after the kill Read = %+v, %t; want the dead child's details, not held", h, held)
	}
	l, err := Acquire(dir, "parent")
	if err != nil {
		t.Fatalf("stale lock of a dead process: %v", err)
	}
	defer l.Release()
	if h, _ := Read(dir); h.PID != os.Getpid() || h.Command != "parent" {
		t.Errorf("taken over, the file names %+v", h)
	}
}

// TestReleasedByChild: a child that releases lets the parent in.
func TestReleasedByChild(t *testing.T) {
	dir := t.TempDir()
	child, release := holdInChild(t, dir)
	release()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir, "parent")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestNotInherited: a process started by the holder does not inherit the
// lock, so it cannot keep the directory locked once the holder is gone.
func TestNotInherited(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "parent")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir, "parent again")
	if err != nil {
		t.Fatalf("the lock outlived its release in a child process: %v", err)
	}
	l2.Release()
}

// TestUnreadableHolder: a lock file that is garbage or empty still refuses,
// without a pid to name.
func TestUnreadableHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("\x1b]52;c;aGk=\x07 not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir, "y")
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "has not written its pid") {
		t.Errorf("garbage holder: %v", err)
	}
}

func TestCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l, err := Acquire(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if fi, err := os.Stat(filepath.Join(dir, FileName)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("lock file: %v", err)
	}
	if time.Since(func() time.Time { h, _ := Read(dir); return h.Since }()) > time.Minute {
		t.Error("since is not now")
	}
}
