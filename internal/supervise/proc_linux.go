//go:build linux

package supervise

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in a process group of its own (so the whole
// tree it spawns can be signalled as one) and has the kernel SIGKILL it if
// the forking thread dies, which happens when the worker dies, however it
// dies. See Process.waiter for why the forking thread is pinned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExited blocks until pid has exited but leaves it a zombie (WNOWAIT),
// so its pid and process group id stay reserved until the caller reaps it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// applyLimits sets the process's resource limits with prlimit(2).
func applyLimits(pid int, l Limits) error {
	var errs []error
	for _, lim := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_CPU, l.CPUSeconds}, {unix.RLIMIT_AS, l.AddressSpace}, {unix.RLIMIT_NOFILE, l.OpenFiles}, {unix.RLIMIT_FSIZE, l.FileSize}} {
		if lim.v == 0 {
			continue
		}
		rl := unix.Rlimit{Cur: lim.v, Max: lim.v}
		if err := unix.Prlimit(pid, lim.res, &rl, nil); err != nil {
			errs = append(errs, fmt.Errorf("supervise: prlimit %d=%d: %w", lim.res, lim.v, err))
		}
	}
	return errors.Join(errs...)
}
