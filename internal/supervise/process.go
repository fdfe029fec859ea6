//go:build unix

package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is one running CLI. Lifecycle: Start → (Stop)? → Wait.
//
// A Process owns up to five goroutines: the waiter (fork and reap, pinned to
// its OS thread), the monitor (timeouts, stop escalation, final result), two
// output readers and, when Spec.Stdin is not a file, a stdin copier. All of
// them have returned when Wait returns.
type Process struct {
	spec     Spec
	pid      int
	limitErr error // set when a configured limit could not be applied
	started  time.Time

	readers [2]*reader
	stdinW  *os.File // parent end of the stdin pipe; nil unless copying
	closeIn sync.Once
	inDone  chan struct{} // closed when the stdin copier returned; nil if none

	// lastOutput is the time of the last chunk from either stream, as an
	// offset from started (monotonic), read by the no-output watchdog.
	lastOutput atomic.Int64

	logMu  sync.Mutex
	logErr error

	stopReq chan struct{} // closed by the first accepted stop request
	exited  chan struct{} // closed by the waiter once the leader is reaped
	done    chan struct{} // closed by the monitor once result is set
	wg      sync.WaitGroup

	mu          sync.Mutex
	stopOutcome Outcome // set by the first accepted stop request
	stopCause   error
	leaderGone  bool // the leader has exited; stop requests are refused
	reaped      bool // the leader's pid may be reused; no more group signals

	// Written by the waiter before close(exited).
	ended   time.Time
	state   *os.ProcessState
	waitErr error

	killed bool // monitor only
	result *Result
}

// reader drains one output pipe with a fixed buffer.
type reader struct {
	stream Stream
	f      *os.File
	cap    *capture
	done   chan struct{}
	cutOff bool // ended by the drain deadline, not EOF; read after done
}

// Start launches spec.Path in a new process group with a parent-death
// signal, stdin from spec.Stdin and both output streams read by the Process.
// If ctx is cancelled the process is stopped exactly like Stop, with
// context.Cause(ctx) as the cause. Launch failures wrap ErrStart and the
// underlying os error (a *fs.PathError for a missing or non-executable
// binary); no goroutine or descriptor outlives a failed Start.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if !filepath.IsAbs(spec.Path) {
		return nil, fmt.Errorf("%w: %w: path %q is not absolute", ErrStart, ErrInvalidSpec, spec.Path)
	}
	if spec.Dir != "" {
		// With a SysProcAttr set, os.StartProcess no longer checks Dir and a
		// missing directory surfaces as "fork/exec PATH: no such file",
		// which blames the binary. Check it here to keep errors honest.
		if _, err := os.Stat(spec.Dir); err != nil {
			return nil, fmt.Errorf("%w: working directory: %w", ErrStart, err)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, context.Cause(ctx))
	}
	spec = spec.withDefaults()

	p := &Process{
		spec:    spec,
		stopReq: make(chan struct{}),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	childFiles, childOwned, parentFiles, err := p.openStdio()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}

	exe, err := launch(spec)
	if err != nil {
		closeAll(append(childOwned, parentFiles...))
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	attr := &os.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env, // non-nil after withDefaults: nothing is inherited
		Files: append(childFiles[:], exe.Files...),
		Sys:   sysProcAttr(),
	}
	forked := make(chan error, 1)
	p.wg.Add(1)
	go p.waiter(exe, attr, forked)
	err = <-forked
	// The child has its own copies now (or never will): close ours. A
	// caller-provided stdin file is not in childOwned; it is the caller's.
	closeAll(childOwned)
	closeAll(exe.Files)
	if err != nil {
		p.wg.Wait() // the waiter returns right after reporting the failure
		closeAll(parentFiles)
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}

	for _, r := range p.readers {
		p.wg.Add(1)
		go p.read(r)
	}
	if p.stdinW != nil {
		p.inDone = make(chan struct{})
		p.wg.Add(1)
		go p.copyStdin()
	}
	p.wg.Add(1)
	go p.monitor(ctx)
	return p, nil
}

// launch is what Start forks and execs: spec's binary, or what
// Spec.Launch makes of it. A binary that is missing or not executable is
// an ErrStart either way, as os.StartProcess reports it: a launcher's own
// step would only find out after the fork.
func launch(spec Spec) (Exec, error) {
	exe := Exec{Path: spec.Path, Argv: append([]string{spec.Path}, spec.Args...)}
	if spec.Launch == nil {
		return exe, nil
	}
	info, err := os.Stat(spec.Path)
	if err == nil && (info.IsDir() || info.Mode()&0o111 == 0) {
		err = &fs.PathError{Op: "fork/exec", Path: spec.Path, Err: syscall.EACCES}
	}
	if err != nil {
		return Exec{}, err
	}
	out, err := spec.Launch(exe)
	if err != nil {
		return Exec{}, fmt.Errorf("supervise: launching %s: %w", spec.Path, err)
	}
	if out.Path == "" || len(out.Argv) == 0 {
		closeFiles(out.Files)
		return Exec{}, fmt.Errorf("%w: Launch returned no program for %s", ErrInvalidSpec, spec.Path)
	}
	return out, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// openStdio creates the child's stdin, stdout and stderr (child), the subset
// of those the Process opened and must close after the fork (childOwned),
// and the parent ends the Process reads and writes (parent). Pipes come from
// os.Pipe, so the parent ends are non-blocking and registered with the
// runtime poller: that is what lets a read deadline or Close interrupt a
// blocked Read or Write.
func (p *Process) openStdio() (child [3]*os.File, childOwned, parent []*os.File, err error) {
	defer func() {
		if err != nil {
			for _, f := range append(childOwned, parent...) {
				_ = f.Close()
			}
			child, childOwned, parent = [3]*os.File{}, nil, nil
		}
	}()
	in := p.spec.Stdin
	if f, ok := in.(*os.File); ok && f == nil {
		in = nil // a typed nil would give the child no fd 0 at all
	}
	switch in := in.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return child, childOwned, parent, err
		}
		child[0], childOwned = f, append(childOwned, f)
	case *os.File:
		child[0] = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return child, childOwned, parent, err
		}
		child[0], childOwned = r, append(childOwned, r)
		p.stdinW, parent = w, append(parent, w)
	}
	for i, s := range []Stream{Stdout, Stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return child, childOwned, parent, err
		}
		child[i+1], childOwned = w, append(childOwned, w)
		parent = append(parent, r)
		p.readers[i] = &reader{stream: s, f: r, cap: newCapture(p.spec.MaxCapture), done: make(chan struct{})}
	}
	return child, childOwned, parent, nil
}

// waiter forks the child and reaps it.
//
// Pdeathsig is delivered when the *thread* that forked the child exits, not
// when the process does, and the Go runtime does retire threads (whenever a
// goroutine exits while locked to one). An unpinned fork could therefore see
// its child SIGKILLed at a random later moment. The waiter pins itself to its
// thread from fork to reap, so that thread lives exactly as long as the child
// needs it; the price is one OS thread per running CLI.
func (p *Process) waiter(exe Exec, attr *os.ProcAttr, forked chan<- error) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	proc, err := os.StartProcess(exe.Path, exe.Argv, attr)
	if err != nil {
		forked <- err
		return
	}
	p.pid = proc.Pid
	p.started = time.Now()
	p.limitErr = applyLimits(p.pid, p.spec.Limits)
	forked <- nil

	// Observe the exit without reaping where the platform allows it: while
	// the leader is a zombie its pid, and so the group id, cannot be reused,
	// so killing -pid cannot hit an unrelated group.
	if waitExited(p.pid) == nil {
		p.leaderExited(false)
		// The leader exiting means the job is over: nothing it spawned
		// may keep running (or keep the output pipes open). Known limit:
		// a descendant that called setsid(2) is in another group and
		// survives this; only a cgroup per run would catch it.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		p.state, p.waitErr = proc.Wait()
	} else {
		// No non-reaping wait here: reap first, then kill the group. The
		// group id stays valid while any member lives, so this can only
		// miss (ESRCH), not hit someone else, unless the group emptied
		// and its id was recycled in between.
		p.state, p.waitErr = proc.Wait()
		p.leaderExited(true)
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	if p.waitErr != nil {
		p.waitErr = fmt.Errorf("supervise: collecting exit status of pid %d: %w", p.pid, p.waitErr)
	}
	close(p.exited)
}

// leaderExited records the exit: from now on stop requests are refused and,
// once reaped, the group is no longer signalled.
func (p *Process) leaderExited(reaped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaderGone = true
	p.reaped = reaped
	p.ended = time.Now()
}

// read drains one output pipe until EOF or the drain deadline.
func (p *Process) read(r *reader) {
	defer p.wg.Done()
	defer close(r.done)
	defer r.f.Close()
	buf := make([]byte, readBufSize)
	for {
		n, err := r.f.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.lastOutput.Store(int64(time.Since(p.started)))
			r.cap.write(chunk)
			p.writeLog(chunk)
			if p.spec.OnOutput != nil {
				p.spec.OnOutput(r.stream, chunk)
			}
		}
		if err != nil {
			r.cutOff = errors.Is(err, os.ErrDeadlineExceeded)
			return
		}
	}
}

func (p *Process) writeLog(b []byte) {
	if p.spec.LogFile == nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if p.logErr != nil {
		return
	}
	if _, err := p.spec.LogFile.Write(b); err != nil {
		p.logErr = fmt.Errorf("supervise: writing log file: %w", err)
	}
}

// copyStdin feeds spec.Stdin to the child. It ends at EOF, when the child
// closes its end (EPIPE), or when the monitor closes the pipe after the exit.
func (p *Process) copyStdin() {
	defer p.wg.Done()
	defer close(p.inDone)
	_, _ = io.Copy(p.stdinW, p.spec.Stdin)
	p.closeStdin()
}

func (p *Process) closeStdin() {
	if p.stdinW != nil {
		p.closeIn.Do(func() { _ = p.stdinW.Close() })
	}
}

// Pid is the process id of the leader, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Stop asks the process to stop: SIGTERM to the whole group, then SIGKILL to
// the whole group after Spec.Grace. It returns at once (the escalation is run
// by the Process) and is idempotent and safe for concurrent use: the first
// call wins and later ones, or calls after the process exited by itself, do
// nothing. A nil cause is recorded as ErrStopped. Wait observes the end.
func (p *Process) Stop(cause error) {
	if cause == nil {
		cause = ErrStopped
	}
	p.requestStop(Stopped, cause)
}

func (p *Process) requestStop(o Outcome, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leaderGone || p.stopOutcome != "" {
		return
	}
	p.stopOutcome, p.stopCause = o, cause
	close(p.stopReq)
}

// signalGroup signals the whole process group unless the leader has been
// reaped (its id might then belong to someone else). It reports whether the
// leader was still running, i.e. whether the signal was needed.
func (p *Process) signalGroup(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return false
	}
	_ = syscall.Kill(-p.pid, sig)
	return !p.leaderGone
}

// Wait blocks until the leader has exited, its group has been killed and both
// output streams are drained, then returns the Result. It is safe to call
// more than once and concurrently; every call returns the same *Result.
func (p *Process) Wait() *Result {
	<-p.done
	p.wg.Wait()
	return p.result
}

// Run is Start followed by Wait.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	p, err := Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return p.Wait(), nil
}

// monitor turns ctx cancellation and the timeouts into stop requests, runs
// the SIGTERM → grace → SIGKILL escalation, and once the leader is gone
// drains the streams and publishes the Result.
func (p *Process) monitor(ctx context.Context) {
	defer p.wg.Done()

	var wallC, idleC, graceC <-chan time.Time
	if p.spec.Timeout > 0 {
		t := time.NewTimer(p.spec.Timeout - time.Since(p.started))
		defer t.Stop()
		wallC = t.C
	}
	var idle *time.Timer
	if p.spec.NoOutputTimeout > 0 {
		idle = time.NewTimer(p.spec.NoOutputTimeout - time.Since(p.started))
		defer idle.Stop()
		idleC = idle.C
	}
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	ctxDone, stopReq := ctx.Done(), p.stopReq

	for running := true; running; {
		select {
		case <-p.exited:
			running = false
		case <-ctxDone:
			ctxDone = nil
			p.requestStop(Stopped, context.Cause(ctx))
		case <-wallC:
			wallC = nil
			p.requestStop(TimedOut, ErrTimeout)
		case <-idleC:
			// Readers only record the time of the last chunk; re-arm for
			// the remainder instead of resetting the timer per chunk.
			quiet := time.Since(p.started) - time.Duration(p.lastOutput.Load())
			if quiet >= p.spec.NoOutputTimeout {
				idleC = nil
				p.requestStop(Hung, ErrNoOutput)
			} else {
				idle.Reset(p.spec.NoOutputTimeout - quiet)
			}
		case <-stopReq:
			// Whatever caused it, the process is on its way out: no other
			// trigger can change the outcome any more.
			stopReq, wallC, idleC, ctxDone = nil, nil, nil, nil
			p.signalGroup(syscall.SIGTERM)
			grace = time.NewTimer(p.spec.Grace)
			graceC = grace.C
		case <-graceC:
			graceC = nil
			if p.signalGroup(syscall.SIGKILL) {
				p.killed = true
			}
		}
	}
	p.finish()
}

// finish runs after the leader was reaped and its group killed.
func (p *Process) finish() {
	// A copier still blocked writing to a child that never read its stdin
	// is released by closing the pipe.
	p.closeStdin()

	// Group members are dead, so the pipes normally reach EOF at once; give
	// them drainTimeout to deliver what is buffered, then cut off whatever
	// still holds them (a process outside the group).
	drain := time.NewTimer(drainTimeout)
	defer drain.Stop()
	cut := false
	for _, r := range p.readers {
		if !cut {
			select {
			case <-r.done:
				continue
			case <-drain.C:
				cut = true
				for _, r := range p.readers {
					_ = r.f.SetReadDeadline(time.Now())
				}
			}
		}
		<-r.done
	}
	if p.inDone != nil {
		<-p.inDone
	}

	res := &Result{
		Started:  p.started,
		Ended:    p.ended,
		Killed:   p.killed,
		Stdout:   p.readers[0].cap.result(),
		Stderr:   p.readers[1].cap.result(),
		ExitCode: -1,
		Err:      p.waitErr,
	}
	p.logMu.Lock()
	res.LogErr = p.logErr
	res.LimitErr = p.limitErr
	p.logMu.Unlock()
	for _, r := range p.readers {
		res.OutputAbandoned = res.OutputAbandoned || r.cutOff
	}
	signaled := false
	if p.state != nil {
		if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signaled = true
			res.Signal = ws.Signal().String()
		} else {
			res.ExitCode = p.state.ExitCode()
		}
	}
	p.mu.Lock()
	outcome, cause := p.stopOutcome, p.stopCause
	p.mu.Unlock()
	switch {
	case outcome != "":
		res.Outcome, res.StopCause = outcome, cause
	case signaled:
		res.Outcome = Signaled
	default:
		res.Outcome = Exited
	}
	p.result = res
	close(p.done)
}
