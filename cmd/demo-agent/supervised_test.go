//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/supervise"
)

// These tests run the agent the way a worker does, under supervise, for the
// directives that are about misbehaving: hanging, ignoring SIGTERM, leaving
// a grandchild behind.

func supervised(t *testing.T, prompt string) supervise.Spec {
	return supervise.Spec{
		Path:  agentBin,
		Dir:   t.TempDir(),
		Env:   agentEnv(t),
		Stdin: strings.NewReader(prompt),
	}
}

// onStderr closes the returned channel once marker has been seen on stderr.
func onStderr(marker string) (func(supervise.Stream, []byte), <-chan struct{}) {
	ch := make(chan struct{})
	var seen bytes.Buffer
	var once sync.Once
	return func(s supervise.Stream, p []byte) {
		if s != supervise.Stderr {
			return
		}
		seen.Write(p)
		if bytes.Contains(seen.Bytes(), []byte(marker)) {
			once.Do(func() { close(ch) })
		}
	}, ch
}

func TestHang(t *testing.T) {
	t.Parallel()
	spec := supervised(t, "@hang\n@write never.txt x")
	spec.NoOutputTimeout = 300 * time.Millisecond
	res, err := supervise.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != supervise.Hung || res.Signal != "terminated" {
		t.Fatalf("result %+v, want hung and terminated", res)
	}
	if lines := strings.Count(res.Stdout.String(), "\n"); lines != 1 {
		t.Errorf("want only the init line, got %q", res.Stdout.String())
	}
}

func TestIgnoreSigterm(t *testing.T) {
	t.Parallel()
	spec := supervised(t, "@ignore-sigterm\n@stderr ready\n@hang")
	spec.Grace = 200 * time.Millisecond
	var ready <-chan struct{}
	spec.OnOutput, ready = onStderr("ready\n")
	p, err := supervise.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		p.Stop(nil)
		p.Wait()
		t.Fatal("agent never got ready")
	}
	p.Stop(nil)
	res := p.Wait()
	if !res.Killed || res.Signal != "killed" {
		t.Fatalf("result %+v, want SIGKILL after the grace period", res)
	}
}

func TestSpawnGrandchild(t *testing.T) {
	t.Parallel()
	spec := supervised(t, "@spawn-grandchild\n@write done.txt x")
	res, err := supervise.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`grandchild pid (\d+)`).FindStringSubmatch(res.Stderr.String())
	if res.Outcome != supervise.Exited || res.ExitCode != 0 || m == nil {
		t.Fatalf("result %+v stderr %q", res, res.Stderr.String())
	}
	pid, _ := strconv.Atoi(m[1])
	// The grandchild held stdout and stderr open, yet Wait returned; and it
	// was killed with the group when the agent exited.
	for deadline := time.Now().Add(5 * time.Second); !gone(pid); {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived the agent", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether pid no longer runs; an unreaped zombie counts as gone
// (PID 1 in a container may not reap orphans).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}
