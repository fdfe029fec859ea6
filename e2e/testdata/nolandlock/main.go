// Command nolandlock runs a command on what looks, to it and everything it
// starts, like a kernel without Landlock: a seccomp filter answers the
// Landlock system calls with ENOSYS, as a kernel built without Landlock
// does. The e2e tests start workers under it to check that a worker that
// cannot confine its attempts refuses them (TestNoLandlock).
//
//	nolandlock PROGRAM [ARGS...]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nolandlock PROGRAM [ARGS...]")
		os.Exit(2)
	}
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = 0xc000003e // AUDIT_ARCH_X86_64
	case "arm64":
		arch = 0xc00000b7 // AUDIT_ARCH_AARCH64
	default:
		fmt.Fprintln(os.Stderr, "nolandlock: unsupported architecture", runtime.GOARCH)
		os.Exit(2)
	}
	// landlock_create_ruleset, landlock_add_rule, landlock_restrict_self:
	// 444-446 everywhere.
	filter := []unix.SockFilter{
		{Code: 0x20, K: 4},                  // ld arch
		{Code: 0x15, Jt: 0, Jf: 4, K: arch}, // other arch → allow
		{Code: 0x20, K: 0},                  // ld nr
		{Code: 0x35, Jt: 0, Jf: 2, K: 444},  // nr < 444 → allow
		{Code: 0x35, Jt: 1, Jf: 0, K: 447},  // nr >= 447 → allow
		{Code: 0x06, K: 0x00050000 | 38},    // ENOSYS
		{Code: 0x06, K: 0x7fff0000},         // allow
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "nolandlock: no_new_privs:", err)
		os.Exit(1)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog))); e != 0 {
		fmt.Fprintln(os.Stderr, "nolandlock: seccomp:", e)
		os.Exit(1)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nolandlock:", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "nolandlock: exec:", err)
	os.Exit(126)
}
