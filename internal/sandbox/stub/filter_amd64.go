//go:build linux

package stub

// filter is the step's seccomp filter on amd64 (AUDIT_ARCH_X86_64, socket
// is system call 41).
var filter = seccompFilter(0xc000003e, 41)
