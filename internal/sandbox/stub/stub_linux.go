//go:build linux

package stub

import (
	"runtime"
	"syscall"
	"unsafe"
)

// sysLandlockRestrictSelf is landlock_restrict_self(2): 446 on every
// architecture (the syscall table is shared since Linux 5.13).
const sysLandlockRestrictSelf = 446

func init() {
	argv, ok := cmdline()
	if !ok || len(argv) == 0 || argv[0] != Name {
		return
	}
	Exec(argv)
}

// Exec is the step itself, given its argv; it returns only by exiting.
func Exec(argv []string) {
	if len(argv) < 3 {
		fail("usage: "+Name+" PATH ARGV0 [ARGS...]", 0, ExitCannotRun)
	}
	// Capabilities, no_new_privs, the filter and the ruleset are per
	// thread until the exec makes the thread the whole process: keep them
	// on one.
	runtime.LockOSThread()
	dropCapabilities()
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		fail("prctl(PR_SET_NO_NEW_PRIVS)", e, ExitCannotRun)
	}
	if len(filter) > 0 {
		prog := sockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&prog))); e != 0 {
			fail("prctl(PR_SET_SECCOMP)", e, ExitCannotRun)
		}
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, RulesetFD, 0, 0); e != 0 {
		fail("landlock_restrict_self", e, ExitCannotRun)
	}
	syscall.Close(RulesetFD)
	err := syscall.Exec(argv[1], argv[2:], syscall.Environ())
	e, _ := err.(syscall.Errno)
	code := ExitCannotRun
	if e == syscall.ENOENT {
		code = ExitNotFound
	}
	fail("exec "+argv[1], e, code)
}

func fail(what string, e syscall.Errno, code int) {
	msg := Name + ": " + what
	if e != 0 {
		msg += ": " + e.Error()
	}
	b := []byte(msg + "\n")
	syscall.Write(2, b)
	syscall.Exit(code)
}

// cmdline reads this process's argv from /proc/self/cmdline: package os,
// which holds it otherwise, is not initialized yet.
func cmdline() ([]string, bool) {
	path := []byte("/proc/self/cmdline\x00")
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&path[0])),
		syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return nil, false
	}
	defer syscall.Close(int(fd))
	buf := make([]byte, 4096)
	n := 0
	for {
		m, err := syscall.Read(int(fd), buf[n:])
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break
		}
		n += m
		// Most processes are not the step: only its argv is read whole.
		if n > len(Name) && string(buf[:len(Name)+1]) != Name+"\x00" {
			return []string{""}, true
		}
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
	buf = buf[:n]
	var argv []string
	start := 0
	for i, b := range buf {
		if b == 0 {
			argv = append(argv, string(buf[start:i]))
			start = i + 1
		}
	}
	return argv, true
}

// atFDCWD is AT_FDCWD (-100) as a syscall argument, which package syscall
// does not export on every architecture.
const atFDCWD = ^uintptr(99)

// prSetNoNewPrivs is PR_SET_NO_NEW_PRIVS from <linux/prctl.h>.
const prSetNoNewPrivs = 38

// Constants of <linux/prctl.h>, <linux/seccomp.h> and <linux/capability.h>.
const (
	prCapbsetDrop          = 24
	prSetSeccomp           = 22
	prCapAmbient           = 47
	prCapAmbientClearAll   = 4
	seccompModeFilter      = 2
	linuxCapabilityVersion = 0x20080522 // _LINUX_CAPABILITY_VERSION_3
	lastCap                = 63
)

// dropCapabilities empties every capability set. Dropping the bounding set
// needs CAP_SETPCAP, which only a privileged worker has, and only it has
// anything to drop; a failed capset is fatal.
func dropCapabilities() {
	for c := uintptr(0); c <= lastCap; c++ {
		syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0)
	}
	syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	hdr := struct {
		version uint32
		pid     int32
	}{linuxCapabilityVersion, 0}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		fail("capset", e, ExitCannotRun)
	}
}

// sockFilter and sockFprog are struct sock_filter and struct sock_fprog.
type sockFilter struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}

type sockFprog struct {
	Len    uint16
	Filter *sockFilter
}

// seccompFilter is the step's filter for an architecture: see the package
// doc. Jumps are relative to the next instruction.
func seccompFilter(arch uint32, sysSocket uint32) []sockFilter {
	const (
		ldW      = 0x20 // BPF_LD | BPF_W | BPF_ABS
		jeq      = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
		jge      = 0x35 // BPF_JMP | BPF_JGE | BPF_K
		ret      = 0x06 // BPF_RET | BPF_K
		allow    = 0x7fff0000
		errno    = 0x00050000
		nosys    = errno | 38 // ENOSYS
		noproto  = errno | 93 // EPROTONOSUPPORT: callers fall back to TCP
		mptcp    = 262        // IPPROTO_MPTCP
		x32      = 0x40000000 // __X32_SYSCALL_BIT
		uringSet = 425        // io_uring_setup, _enter, _register: 425-427 everywhere
	)
	return []sockFilter{
		{ldW, 0, 0, 4},            // 0: arch
		{jeq, 0, 10, arch},        // 1: another ABI → 12
		{ldW, 0, 0, 0},            // 2: syscall number
		{jge, 8, 0, x32},          // 3: x32 → 12
		{jeq, 0, 2, sysSocket},    // 4: socket? else → 7
		{ldW, 0, 0, 32},           // 5: args[2], the protocol (low word)
		{jeq, 4, 3, mptcp},        // 6: MPTCP → 11, else → 10
		{jeq, 4, 0, uringSet},     // 7: → 12
		{jeq, 3, 0, uringSet + 1}, // 8: → 12
		{jeq, 2, 0, uringSet + 2}, // 9: → 12
		{ret, 0, 0, allow},        // 10
		{ret, 0, 0, noproto},      // 11
		{ret, 0, 0, nosys},        // 12
	}
}
