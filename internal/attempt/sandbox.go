package attempt

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/supervise"
)

// confined is how one attempt process runs: its confinement and what its
// output says was denied, or nothing when the sandbox is off. Its methods
// work on a nil *confined, which runs the process as it is.
type confined struct {
	c   *sandbox.Confinement
	den *sandbox.Denials
}

// confine builds the sandbox policy of a process the attempt starts — the
// CLI (its verification commands run under the same), or the validator —
// from what its command needs (adapter.Command.Sandbox), the attempt's
// worktree and its repository's objects, and the worker's secrets. tmp is
// the attempt's scratch dir: what the command needs inside it (its TMPDIR,
// its own HOME, the prompt file) is the attempt's own and granted even
// though the work dir it lives in is denied. Nil when the sandbox is off.
func (r *Runner) confine(cmd *adapter.Command, wt *checkout.Checkout, tmp string) (*confined, error) {
	if r.Sandbox == nil {
		return nil, nil
	}
	p := sandbox.Policy{
		Own: []sandbox.Grant{
			{Path: wt.Path, Write: true},
			{Path: filepath.Join(wt.CommonDir(), "objects")},
		},
		Exec:    cmd.Path,
		Deny:    append(append([]string(nil), r.SandboxDeny...), cmd.Sandbox.Deny...),
		Connect: cmd.Sandbox.Connect,
		Bind:    cmd.Sandbox.Bind,
	}
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p.PATH = filepath.SplitList(v)
		}
	}
	for _, g := range append(grants(cmd.Sandbox.Read, false), grants(cmd.Sandbox.Write, true)...) {
		if rel, err := filepath.Rel(tmp, g.Path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			p.Own = append(p.Own, g)
		} else {
			p.Extra = append(p.Extra, g)
		}
	}
	c, err := r.Sandbox.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("attempt: sandbox policy: %w", err)
	}
	den := c.Denials(wt.Path)
	den.SetEndpoints(sandboxEndpoints(cmd.Sandbox.Endpoints))
	return &confined{c: c, den: den}, nil
}

func grants(paths []string, write bool) []sandbox.Grant {
	out := make([]sandbox.Grant, len(paths))
	for i, p := range paths {
		out[i] = sandbox.Grant{Path: p, Write: write}
	}
	return out
}

// launch is the supervise.Spec Launch that confines the process.
func (x *confined) launch() func(supervise.Exec) (supervise.Exec, error) {
	if x == nil {
		return nil
	}
	return func(e supervise.Exec) (supervise.Exec, error) {
		path, argv, ruleset, err := x.c.Wrap(e.Path, e.Argv)
		if err != nil {
			return supervise.Exec{}, err
		}
		return supervise.Exec{Path: path, Argv: argv, Files: append(e.Files, ruleset)}, nil
	}
}

// tee reads the output for denials on its way to next.
func (x *confined) tee(next func(supervise.Stream, []byte)) func(supervise.Stream, []byte) {
	if x == nil {
		return next
	}
	return func(s supervise.Stream, p []byte) {
		x.den.Write(int(s), p)
		if next != nil {
			next(s, p)
		}
	}
}

// denied is what the output said the sandbox refused.
func (x *confined) denied() []string {
	if x == nil {
		return nil
	}
	return x.den.List()
}

// sandboxState says how the attempt's processes run, for its report.
func (r *Runner) sandboxState() string {
	if r.Sandbox == nil {
		if r.SandboxOff != "" {
			return r.SandboxOff
		}
		return "off"
	}
	return r.Sandbox.Support().String()
}

// Wrap confines a process an in-process runtime starts (the native
// runtime's shell commands, tools.Sandbox): it starts through the re-exec
// step under the attempt's policy, and its output is read for denials as
// the CLI's is. A nil *confined leaves spec as it is.
func (x *confined) Wrap(spec *supervise.Spec) error {
	if x == nil {
		return nil
	}
	spec.Launch, spec.OnOutput = x.launch(), x.tee(spec.OnOutput)
	return nil
}

// confiner is x as an in-process runtime's confiner; nil (no sandbox) as a
// nil interface, so that the runtime runs its commands as they are.
func (x *confined) confiner() adapter.Confiner {
	if x == nil {
		return nil
	}
	return x
}
