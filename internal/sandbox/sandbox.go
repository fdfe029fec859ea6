package sandbox

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/drover-dev/drover/internal/sandbox/stub"
)

// Sandbox confines processes on this host. It holds no state but what the
// kernel offers; every Confinement it compiles is independent.
type Sandbox struct {
	support Support
	// exe is the binary started as the re-exec step: the running one.
	exe string
}

// New returns a sandbox for what the kernel offers, or an error wrapping
// ErrUnavailable when that is not enough (Support.Usable).
func New(s Support) (*Sandbox, error) {
	if err := s.Usable(); err != nil {
		return nil, err
	}
	return &Sandbox{support: s, exe: "/proc/self/exe"}, nil
}

// Support is what the sandbox was made with.
func (s *Sandbox) Support() Support { return s.support }

// Wrap returns how to start path with argv (argv[0] included) confined:
// the re-exec step's binary and argv, and the ruleset, which the child
// must get as descriptor 3 (stub.RulesetFD) and the caller must close once
// the child has started. Every call makes a fresh ruleset.
func (c *Confinement) Wrap(path string, argv []string) (exe string, stepArgv []string, ruleset *os.File, err error) {
	if len(argv) == 0 {
		return "", nil, nil, fmt.Errorf("sandbox: empty argv for %s", path)
	}
	f, err := c.ruleset()
	if err != nil {
		return "", nil, nil, err
	}
	return c.sb.exe, append([]string{stub.Name, path}, argv...), f, nil
}

// Cmd rewrites cmd to start confined, as Wrap does; the returned func
// closes the ruleset and must be called once cmd has started (or failed
// to). cmd.ExtraFiles must be empty: the ruleset takes descriptor 3.
func (c *Confinement) Cmd(cmd *exec.Cmd) (done func(), err error) {
	if len(cmd.ExtraFiles) > 0 {
		return nil, fmt.Errorf("sandbox: %s already has extra files", cmd.Path)
	}
	exe, argv, f, err := c.Wrap(cmd.Path, cmd.Args)
	if err != nil {
		return nil, err
	}
	cmd.Path, cmd.Args, cmd.ExtraFiles = exe, argv, []*os.File{f}
	cmd.Err = nil // exec.Command's lookup error, if any, was about the old path
	return func() { _ = f.Close() }, nil
}

// Main runs the re-exec step if the process was started as it, and
// returns otherwise. Call it first thing in main: package stub's init
// normally runs the step before main, and Main only does where that could
// not read the process's argv.
func Main() {
	if len(os.Args) > 0 && os.Args[0] == stub.Name {
		stub.Exec(os.Args)
	}
}
