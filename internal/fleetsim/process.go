package fleetsim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a controller started as a process of its own (`controller
// serve` with its embedded nats-server), so that its CPU time and memory
// are its own.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	DataDir string
	Log     string // its log file
	URL     string // its NATS
	HTTP    string // its http.listen, when it serves one
}

// ProcessOptions says how to start the controller.
type ProcessOptions struct {
	// Binary is the controller's executable.
	Binary string
	// DataDir is its data dir: JetStream's files and the projection.
	DataDir string
	// Pprof serves /debug/pprof on a loopback port of its own.
	Pprof bool
	// Env is added to this process's environment (DROVER_* included).
	Env []string
}

// StartController starts `controller serve` on a free loopback port and
// returns once it has written its NATS URL, or ctx ends, or it exits.
func StartController(ctx context.Context, o ProcessOptions) (*Process, error) {
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	p := &Process{DataDir: o.DataDir, Log: filepath.Join(o.DataDir, "controller.log"), done: make(chan struct{})}
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	p.cmd = exec.Command(o.Binary, "serve", "--data-dir", o.DataDir, "--nats-listen", "127.0.0.1:-1")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = append(os.Environ(), o.Env...)
	if o.Pprof {
		p.cmd.Env = append(p.cmd.Env, "DROVER_HTTP_LISTEN=127.0.0.1:0", "DROVER_HTTP_PPROF=true")
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("fleetsim: start the controller: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx, o.Pprof); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// waitReady waits for the controller's nats.url, and its HTTP address when
// it serves one.
func (p *Process) waitReady(ctx context.Context, http bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(p.DataDir, "nats.url")); err == nil && len(bytes.TrimSpace(b)) > 0 {
			p.URL = strings.TrimSpace(string(b))
		}
		if http && p.HTTP == "" {
			b, _ := os.ReadFile(p.Log)
			if _, rest, ok := bytes.Cut(b, []byte(`msg="serving metrics and health" addr=`)); ok {
				p.HTTP = string(bytes.Fields(rest)[0])
			}
		}
		if p.URL != "" && (!http || p.HTTP != "") {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-p.done:
			return fmt.Errorf("fleetsim: the controller exited: %v (log: %s)", p.err, p.Log)
		case <-deadline:
			return fmt.Errorf("fleetsim: the controller did not start within 2 minutes (log: %s)", p.Log)
		case <-t.C:
		}
	}
}

// Alive returns an error once the controller has exited.
func (p *Process) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("fleetsim: the controller exited: %v (log: %s)", p.err, p.Log)
	default:
		return nil
	}
}

// Stop stops the controller: SIGTERM, then SIGKILL of its group after 30 s.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Pid is the controller's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// CPU is the CPU time a process has used, user and system, from
// /proc/PID/stat.
func CPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("fleetsim: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("fleetsim: /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, i := range []int{11, 12} { // utime and stime: fields 14 and 15
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on Linux.
const clockTicks = 100

// Memory is a process's resident set in bytes, from /proc/PID/status: now
// (VmRSS) and its peak (VmHWM).
func Memory(pid int) (rss, peak int64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("fleetsim: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak, nil
}

// Profile saves a profile the controller serves on /debug/pprof (what:
// "profile?seconds=N", "heap") to file.
func (p *Process) Profile(ctx context.Context, what, file string) error {
	if p.HTTP == "" {
		return errors.New("fleetsim: the controller serves no pprof")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.HTTP+"/debug/pprof/"+what, nil)
	if err != nil {
		return fmt.Errorf("fleetsim: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fleetsim: profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fleetsim: profile %s: %s", what, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("fleetsim: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("fleetsim: profile: %w", err)
	}
	return f.Close()
}
