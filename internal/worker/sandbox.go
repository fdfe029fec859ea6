package worker

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/telemetry"
)

// Option changes how New builds a worker.
type Option func(*options)

type options struct {
	probe      sandbox.Prober
	dev        bool
	runner     Runner
	claimTimes func(ClaimTimes)
}

// WithSandboxProbe replaces the Landlock probe (tests simulate a kernel
// without it).
func WithSandboxProbe(p sandbox.Prober) Option {
	return func(o *options) { o.probe = p }
}

// Dev marks a worker of `controller dev`: on a kernel that cannot confine
// it runs CLIs unconfined, saying so at start and on every attempt,
// instead of claiming nothing.
func Dev() Option {
	return func(o *options) { o.dev = true }
}

// sandboxState is how a worker confines its attempts: a sandbox, or
// unconfined for a stated reason (off), or not at all because it cannot
// (unavailable: then it claims nothing).
type sandboxState struct {
	sb          *sandbox.Sandbox
	off         string
	unavailable error
}

// resolveSandbox decides the worker's sandbox from its configuration and
// what the kernel offers. No silent downgrade: with worker.sandbox on, a
// kernel that cannot confine makes the worker unavailable, except in
// `controller dev`, where it runs unconfined and says so.
func resolveSandbox(cfg *config.Config, probe sandbox.Prober, dev bool) sandboxState {
	if cfg.Worker.Sandbox == config.SandboxOff {
		return sandboxState{off: "off: worker.sandbox is off; CLIs run with the worker's own access"}
	}
	if probe == nil {
		probe = sandbox.Probe
	}
	sb, err := sandbox.New(probe())
	switch {
	case err == nil:
		return sandboxState{sb: sb}
	case dev:
		return sandboxState{off: fmt.Sprintf("off: controller dev on a kernel that cannot confine (%s); CLIs run with the worker's own access", sandbox.Reason(err))}
	}
	return sandboxState{unavailable: fmt.Errorf("%w; set worker.sandbox: off to run CLIs unconfined", err)}
}

// String is the sandbox as the registration, `worker runtime health` and
// the logs show it.
func (s sandboxState) String() string {
	switch {
	case s.sb != nil:
		return s.sb.Support().String()
	case s.unavailable != nil:
		return "unavailable: " + sandbox.Reason(s.unavailable)
	}
	return s.off
}

// logSandbox says at start how the worker's attempts will run: loudly
// when they run unconfined or not at all.
func (w *Worker) logSandbox() {
	switch s := w.sandbox; {
	case s.unavailable != nil:
		w.log.Error("sandbox unavailable: claiming nothing", "err", sandbox.Reason(s.unavailable))
	case s.sb == nil && w.own == nil:
		w.log.Info("attempts are run by the runner the worker was given (WithRunner): it starts no process")
	case s.sb == nil:
		w.log.Error("SANDBOX OFF: CLIs will run with this worker's own access", "why", s.off)
	default:
		w.log.Info("sandbox on", "landlock", s.String())
	}
}

// SandboxStatus is what a worker with this configuration would do about
// confinement on this host: its state as `worker runtime health` shows it,
// and whether it would claim attempts.
func SandboxStatus(cfg *config.Config, probe sandbox.Prober) (status string, claims bool) {
	s := resolveSandbox(cfg, probe, false)
	return s.String(), s.unavailable == nil
}

// gitConfine confines the git commands the checkout package runs in an
// agent's repository: they read it and the cache's objects, nothing else
// of the worker, and write nothing but their output.
func gitConfine(sb *sandbox.Sandbox, deny []string) func(*exec.Cmd, []string) (func(), error) {
	return func(cmd *exec.Cmd, read []string) (func(), error) {
		p := sandbox.Policy{Exec: cmd.Path, Deny: deny}
		for _, r := range read {
			p.Own = append(p.Own, sandbox.Grant{Path: r})
		}
		c, err := sb.Compile(p)
		if err != nil {
			return nil, err
		}
		return c.Cmd(cmd)
	}
}

// addSandboxCheck makes /readyz fail while the sandbox is unavailable.
func (w *Worker) addSandboxCheck() func() {
	return telemetry.AddCheck("worker_sandbox", func(context.Context) error {
		if w.sandbox.unavailable != nil {
			return errors.New(w.sandbox.String())
		}
		return nil
	})
}
