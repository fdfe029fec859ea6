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

// Process is a process the simulator started — the controller (`controller
// serve`), or the nats-server it uses — so that its CPU time and memory are
// its own.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	what    string // "controller", "nats-server"
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
	// NATSURL is the nats-server the controller uses; "" has it run its
	// embedded one.
	NATSURL string
	// Pprof serves /debug/pprof on a loopback port of its own.
	Pprof bool
	// Env is added to this process's environment (DROVER_* included).
	Env []string
	// What it is called in errors and its log's name: "controller"
	// unless set ("standby controller").
	What string
}

// StartController starts `controller serve` and returns once it is up —
// with its embedded nats-server, once it has written its NATS URL (a free
// loopback port); with NATSURL, once it started (whoever uses it waits for
// it to answer) — or ctx ends, or it exits.
func StartController(ctx context.Context, o ProcessOptions) (*Process, error) {
	argv := []string{o.Binary, "serve", "--data-dir", o.DataDir, "--nats-listen", "127.0.0.1:-1"}
	if o.NATSURL != "" {
		argv = []string{o.Binary, "serve", "--data-dir", o.DataDir, "--nats-url", o.NATSURL}
	}
	env := o.Env
	if o.Pprof {
		env = append(env[:len(env):len(env)], "DROVER_HTTP_LISTEN=127.0.0.1:0", "DROVER_HTTP_PPROF=true")
	}
	what := o.What
	if what == "" {
		what = "controller"
	}
	p, err := startProcess(what, argv, env, o.DataDir)
	if err != nil {
		return nil, err
	}
	p.URL = o.NATSURL
	ready := func() bool {
		if p.URL == "" {
			p.URL = readURL(filepath.Join(p.DataDir, "nats.url"))
		}
		if o.Pprof && p.HTTP == "" {
			b, _ := os.ReadFile(p.Log)
			if _, rest, ok := bytes.Cut(b, []byte(`msg="serving metrics and health" addr=`)); ok {
				p.HTTP = string(bytes.Fields(rest)[0])
			}
		}
		return p.URL != "" && (!o.Pprof || p.HTTP != "")
	}
	if err := p.waitReady(ctx, ready); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// NATSOptions says how to start a nats-server.
type NATSOptions struct {
	// Binary runs the server with its hidden `nats-server` command
	// (cmd/fleetsim's).
	Binary string
	// Dir holds its JetStream store, its URL file and its log.
	Dir string
	// Sync is its sync interval, as nats.sync_interval says it.
	Sync string
	// CPUProfile, if set, is where it saves its CPU profile, taken over
	// ProfileSeconds once sent SIGUSR1.
	CPUProfile     string
	ProfileSeconds int
	// HeapProfile, if set, is where it saves its heap profile once sent
	// SIGUSR2.
	HeapProfile string
}

// StartNATS starts a nats-server with JetStream as a process of its own:
// the server the controller embeds, with the same settings (fsync on every
// write unless Sync says otherwise), on a free loopback port. It returns
// once the server has written its URL.
func StartNATS(ctx context.Context, o NATSOptions) (*Process, error) {
	urlFile := filepath.Join(o.Dir, "nats.url")
	argv := []string{o.Binary, "nats-server", "--store-dir", filepath.Join(o.Dir, "jetstream"), "--url-file", urlFile,
		"--sync-interval", o.Sync, "--cpuprofile", o.CPUProfile, "--profile-seconds", fmt.Sprint(max(o.ProfileSeconds, 1)),
		"--heapprofile", o.HeapProfile}
	p, err := startProcess("nats-server", argv, nil, o.Dir)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, func() bool { p.URL = readURL(urlFile); return p.URL != "" }); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// startProcess starts argv in a process group of its own, its output in
// dir/WHAT.log.
func startProcess(what string, argv, env []string, dir string) (*Process, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	p := &Process{what: what, DataDir: dir, Log: filepath.Join(dir, strings.ReplaceAll(what, " ", "-")+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("fleetsim: start the %s: %w", what, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// readURL is the NATS URL a server wrote to file, "" before it did.
func readURL(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitReady polls ready until it holds, ctx ends, the process exits, or two
// minutes pass.
func (p *Process) waitReady(ctx context.Context, ready func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(2 * time.Minute)
	for !ready() {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-p.done:
			return fmt.Errorf("fleetsim: the %s exited: %v (log: %s)", p.what, p.err, p.Log)
		case <-deadline:
			return fmt.Errorf("fleetsim: the %s did not start within 2 minutes (log: %s)", p.what, p.Log)
		case <-t.C:
		}
	}
	return nil
}

// Alive returns an error once the process has exited.
func (p *Process) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("fleetsim: the %s exited: %v (log: %s)", p.what, p.err, p.Log)
	default:
		return nil
	}
}

// Stop stops the process: SIGTERM, then SIGKILL of its group after 30 s.
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

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

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
