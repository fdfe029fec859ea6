// Package exectest writes executables that tests then run, without the
// "text file busy" race.
//
// A test that writes a script and execs it can fail with ETXTBSY when
// another goroutine forks in between: the child inherits the still-open
// write descriptor until its own exec closes it, and the kernel refuses to
// execute a file open for writing (golang.org/issue/22315). Holding
// syscall.ForkLock for reading while the file is open keeps every fork of
// this process out of that window.
package exectest

import (
	"os"
	"syscall"
)

// WriteExecutable writes data to path with mode 0755, as os.WriteFile does,
// with no fork of this process able to inherit the open file.
func WriteExecutable(path string, data []byte) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, data, 0o755)
}
