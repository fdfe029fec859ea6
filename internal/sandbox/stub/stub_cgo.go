//go:build linux && cgo

package stub

// The step as a C constructor: it runs before the Go runtime starts, which
// makes a confined launch about 2 ms cheaper than the init in
// stub_linux.go (docs/benchmarks.md). It does what Exec does, in the same
// order, with the same filter; when it cannot read its argv it leaves the
// step to Exec.

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

#define DROVER_STUB_NAME "drover-sandbox-exec"
#define DROVER_RULESET_FD 3

static void drover_stub_fail(const char *what, const char *arg, int err, int code) {
	const char *parts[] = {DROVER_STUB_NAME ": ", what, arg ? " " : "", arg ? arg : "", err ? ": " : "", err ? strerror(err) : "", "\n"};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		ssize_t unused = write(2, parts[i], strlen(parts[i]));
		(void)unused;
	}
	_exit(code);
}

// drover_stub_argv reads /proc/self/cmdline into a NULL-terminated argv,
// or returns NULL.
static char **drover_stub_argv(int *argc) {
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0) return NULL;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap + 1);
	for (;;) {
		if (buf == NULL) { close(fd); return NULL; }
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) { if (errno == EINTR) continue; close(fd); free(buf); return NULL; }
		if (n == 0) break;
		len += (size_t)n;
		if (len == cap) { cap *= 2; buf = realloc(buf, cap + 1); }
	}
	close(fd);
	buf[len] = '\0';
	int n = 0;
	for (size_t i = 0; i < len; i++) if (buf[i] == '\0') n++;
	char **argv = calloc((size_t)n + 1, sizeof(char *));
	if (argv == NULL) { free(buf); return NULL; }
	size_t start = 0;
	for (int i = 0; i < n; i++) {
		argv[i] = buf + start;
		start += strlen(buf + start) + 1;
	}
	*argc = n;
	return argv;
}

// drover_stub_confine drops every capability, sets no_new_privs, installs
// the seccomp filter and enforces the ruleset: stub_linux.go's Exec, step
// for step.
static void drover_stub_confine(void) {
	for (int c = 0; c <= 63; c++) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) != 0) drover_stub_fail("capset", NULL, errno, 126);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) drover_stub_fail("prctl(PR_SET_NO_NEW_PRIVS)", NULL, errno, 126);
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define DROVER_ARCH AUDIT_ARCH_X86_64
#define DROVER_SYS_SOCKET 41
#else
#define DROVER_ARCH AUDIT_ARCH_AARCH64
#define DROVER_SYS_SOCKET 198
#endif
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DROVER_ARCH, 0, 10),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 8, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DROVER_SYS_SOCKET, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 262, 4, 3),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 425, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 426, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 427, 2, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPROTONOSUPPORT),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	};
	struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) drover_stub_fail("prctl(PR_SET_SECCOMP)", NULL, errno, 126);
#endif
	if (syscall(446, DROVER_RULESET_FD, 0) != 0) drover_stub_fail("landlock_restrict_self", NULL, errno, 126);
}

__attribute__((constructor)) static void drover_stub(void) {
	// program_invocation_name is argv[0], set by the C library before
	// constructors run: most processes are not the step.
	if (program_invocation_name == NULL || strcmp(program_invocation_name, DROVER_STUB_NAME) != 0) return;
	int argc = 0;
	char **argv = drover_stub_argv(&argc);
	if (argv == NULL) return; // Exec, in Go, tries again
	if (argc < 3) drover_stub_fail("usage: " DROVER_STUB_NAME " PATH ARGV0 [ARGS...]", NULL, 0, 126);
	drover_stub_confine();
	close(DROVER_RULESET_FD);
	execve(argv[1], argv + 2, environ);
	drover_stub_fail("exec", argv[1], errno, errno == ENOENT ? 127 : 126);
}
*/
import "C"
