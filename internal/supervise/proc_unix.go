//go:build unix && !linux

package supervise

import (
	"errors"
	"syscall"
)

// sysProcAttr only isolates the process group here: there is no portable
// parent-death signal, so on these platforms a CLI can outlive a worker that
// is SIGKILLed. Linux is the supported platform.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

var errNoPeek = errors.New("supervise: no non-reaping wait on this platform")

// waitExited cannot wait without reaping on this platform; the waiter then
// reaps first and kills the group afterwards.
func waitExited(int) error { return errNoPeek }

// applyLimits has no prlimit here; configured limits are reported as not applied.
func applyLimits(_ int, l Limits) error {
	if l == (Limits{}) {
		return nil
	}
	return errors.New("supervise: resource limits are only applied on Linux")
}
