//go:build linux

package stub

// filter is the step's seccomp filter on arm64 (AUDIT_ARCH_AARCH64, socket
// is system call 198).
var filter = seccompFilter(0xc00000b7, 198)
