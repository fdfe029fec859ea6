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

// confine builds the sandbox policy of a task the attempt starts — the
// runtime's (its verification commands run under the same), or the
// validator's — from what its processes need (adapter.Needs), the
// attempt's worktree and its repository's objects, and the worker's
// secrets. tmp is the attempt's scratch dir: what the task needs inside it
// (its TMPDIR, its own HOME, the prompt file) is the attempt's own and
// granted even though the work dir it lives in is denied. Nil when the
// sandbox is off.
func (r *Runner) confine(n adapter.Needs, wt *checkout.Checkout, tmp string) (*confined, error) {
	if r.Sandbox == nil {
		return nil, nil
	}
	p := sandbox.Policy{
		Own: []sandbox.Grant{
			{Path: wt.Path, Write: true},
			{Path: filepath.Join(wt.CommonDir(), "objects")},
		},
		Exec:    n.Exec,
		Deny:    append(append([]string(nil), r.SandboxDeny...), n.Sandbox.Deny...),
		Connect: n.Sandbox.Connect,
		Bind:    n.Sandbox.Bind,
	}
	for _, kv := range n.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p.PATH = filepath.SplitList(v)
		}
	}
	for _, g := range append(grants(n.Sandbox.Read, false), grants(n.Sandbox.Write, true)...) {
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
	den.SetEndpoints(sandboxEndpoints(n.Sandbox.Endpoints))
	return &confined{c: c, den: den}, nil
}

func grants(paths []string, write bool) []sandbox.Grant {
	out := make([]sandbox.Grant, len(paths))
	for i, p := range paths {
		out[i] = sandbox.Grant{Path: p, Write: write}
	}
	return out
}

// launch is the supervise.Spec Launch that confines the process; nil for
// a nil *confined.
func (x *confined) launch() func(supervise.Exec) (supervise.Exec, error) {
	if x == nil {
		return nil
	}
	return x.Launch
}

// Launch implements adapter.Confiner: the program starts through the
// re-exec step under the attempt's policy.
func (x *confined) Launch(e supervise.Exec) (supervise.Exec, error) {
	path, argv, ruleset, err := x.c.Wrap(e.Path, e.Argv)
	if err != nil {
		return supervise.Exec{}, err
	}
	return supervise.Exec{Path: path, Argv: argv, Files: append(e.Files, ruleset)}, nil
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

// Wrap implements adapter.Confiner for a process whose output only the
// runtime reads (the native runtime's shell commands, tools.Sandbox): it
// starts through the re-exec step under the attempt's policy, and its
// output is read for denials as the CLI's is. A nil *confined leaves spec
// as it is.
func (x *confined) Wrap(spec *supervise.Spec) error {
	if x == nil {
		return nil
	}
	spec.Launch, spec.OnOutput = x.launch(), x.tee(spec.OnOutput)
	return nil
}

// confiner is x as a task's Confiner; nil (no sandbox) as a nil
// interface, so that the runtime runs its processes as they are.
func (x *confined) confiner() adapter.Confiner {
	if x == nil {
		return nil
	}
	return x
}
