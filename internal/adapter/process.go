package adapter

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/internal/supervise"
)

// Start implements Adapter: the CLI's command (Command), confined as the
// task's Confine says, started under supervision in the worktree — its own
// process group, its output to the task's Output and Log, its timeouts,
// limits and bound on what is kept of each stream.
func (a *CommandAdapter) Start(ctx context.Context, t *Task) (Handle, error) {
	cmd, err := a.Command(&t.Input)
	if err != nil {
		return nil, err
	}
	var c Confiner
	if t.Confine != nil {
		if c, err = t.Confine(Needs{Exec: cmd.Path, Env: cmd.Env, Sandbox: cmd.Sandbox}); err != nil {
			return nil, err
		}
	}
	spec := supervise.Spec{
		Path: cmd.Path, Args: cmd.Args, Dir: t.Worktree, Env: cmd.Env, Stdin: cmd.Stdin,
		Timeout: cmd.Timeout, NoOutputTimeout: cmd.NoOutputTimeout, Grace: cmd.Grace,
		MaxCapture: cmd.MaxOutput, OnOutput: t.Output, LogFile: t.Log, Limits: cmd.Limits,
	}
	if c != nil {
		// Its output is the task's: read there for what the sandbox
		// refused, with the parser's view of what it did meanwhile.
		spec.Launch = c.Launch
	}
	proc, err := supervise.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &process{proc: proc, status: Status{
		Pid: proc.Pid(), Argv: append([]string{cmd.Path}, cmd.Args...), Env: cmd.Env,
		Credential: CredentialFingerprint(cmd.Env),
	}}, nil
}

// process is a CLI's Handle: package supervise's process, which owns the
// process group, its stop (SIGTERM, grace, SIGKILL of the group), its
// timeouts and its output.
type process struct {
	proc   *supervise.Process
	status Status

	once sync.Once
	exit *Exit
}

var _ Handle = (*process)(nil)

func (p *process) Wait() *Exit {
	p.once.Do(func() { p.exit = ProcessExit(p.proc.Wait()) })
	return p.exit
}

func (p *process) Stop(cause error) { p.proc.Stop(cause) }

func (p *process) Inspect() Status { return p.status }

// ProcessExit is how a process's end reads as a task's: its outcome, exit
// code and signal, the stop's cause when it was stopped, ClassifyExit's
// verdict, and the head and tail of each stream.
func ProcessExit(res *supervise.Result) *Exit {
	return &Exit{
		Outcome: string(res.Outcome), ExitCode: res.ExitCode, Signal: res.Signal,
		Started: res.Started, Ended: res.Ended, StopCause: stopCause(res), Err: ClassifyExit(res),
		Stdout: HeadTail(res.Stdout.String(), TailBytes), Stderr: HeadTail(res.Stderr.String(), TailBytes),
		LogErr: res.LogErr, LimitErr: res.LimitErr,
	}
}

// stopCause is why the process was stopped, when Stop or its context
// stopped it; nil when it ended by itself or ran out of time.
func stopCause(res *supervise.Result) error {
	if res.Outcome != supervise.Stopped {
		return nil
	}
	return res.StopCause
}

// TailBytes is how much of each stream of a task a report keeps: its
// head and its tail, half each (HeadTail).
const TailBytes = 8 << 10

// HeadTail keeps the first and the last n/2 bytes of s: how a task started
// and how it ended are both worth reading in a report.
func HeadTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted; the full log is in the object store]…\n%s", s[:n/2], len(s)-n, s[len(s)-n/2:])
}

// CredentialFingerprint names the credentials in a CLI's environment
// without revealing them: the first 12 hex digits of a SHA-256 over the
// NAME=value entries whose names say they hold a secret
// (redact.IsSecretName), sorted. Attempts given the same keys share it, so
// the controller can cool down every runtime that uses a rate-limited key;
// 48 bits of a hash of a key cannot be turned back into the key. "" when
// there are none (a CLI whose login lives in its HOME).
func CredentialFingerprint(env []string) string {
	var secret []string
	for _, kv := range env {
		name, v, ok := strings.Cut(kv, "=")
		if ok && v != "" && redact.IsSecretName(name) {
			secret = append(secret, kv)
		}
	}
	return redact.Fingerprint(secret)
}
