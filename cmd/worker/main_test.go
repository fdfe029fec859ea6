package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exectest"

	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/natsconn"
)

type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExitCodes: the worker CLI's failures and their codes (docs/cli.md).
func TestExitCodes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir()) // no CLI is installed here
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("nats://127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1,
		ConfigFile: writeTemp(t, "auth.conf", "authorization { users = [{user: a, password: b}] }\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	work := t.TempDir()
	// run needs git and a healthy runtime before it looks for NATS.
	bin := t.TempDir()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	if err := os.Symlink(git, filepath.Join(bin, "git")); err != nil {
		t.Fatal(err)
	}
	if err := exectest.WriteExecutable(filepath.Join(bin, "ok"), []byte("#!/bin/sh\necho ok 1.0\n")); err != nil {
		t.Fatal(err)
	}
	okCfg := writeTemp(t, "ok.yaml", "worker:\n  runtimes: [ok]\nruntimes:\n  ok:\n    binary: "+filepath.Join(bin, "ok")+"\n")
	runEnv := map[string]string{"PATH": bin}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"runtime list", []string{"runtime", "list"}, nil, exitcode.OK, ""},
		{"unknown command", []string{"nosuch"}, nil, exitcode.Usage, "unknown command"},
		{"unknown flag", []string{"run", "--bogus"}, nil, exitcode.Usage, "unknown flag"},
		{"unknown subcommand", []string{"runtime", "helth"}, nil, exitcode.Usage, `unknown command "helth" for "worker runtime"`},
		{"a group alone", []string{"runtime"}, nil, exitcode.OK, ""},
		{"an unknown shell", []string{"completion", "tcsh"}, nil, exitcode.Usage, `unknown command "tcsh" for "worker completion"`},
		{"an unknown help topic", []string{"help", "runtime", "nosuch"}, nil, exitcode.Usage, `unknown help topic "runtime nosuch"`},
		{"an argument", []string{"run", "x"}, nil, exitcode.Usage, "unknown command"},
		{"--slots 2.5", []string{"run", "--slots", "2.5"}, nil, exitcode.Usage, "invalid argument"},
		{"--drain-timeout 90", []string{"run", "--drain-timeout", "90"}, nil, exitcode.Usage, "missing unit"},
		{"bad -o", []string{"runtime", "list", "-o", "yaml"}, nil, exitcode.Usage, "-o must be text or json"},
		{"slots out of bounds", []string{"run", "--slots", "100000"}, nil, exitcode.Usage, "worker.slots: must be 1..1024 (got 100000)"},
		{"config /dev/zero", []string{"runtime", "list", "--config", "/dev/zero"}, nil, exitcode.Usage, "is a character device"},
		{"variable without unit", []string{"runtime", "list"}, map[string]string{"DROVER_WORKER_DRAIN_TIMEOUT": "30"}, exitcode.Usage, `worker.drain_timeout: "30" has no unit`},
		{"misspelt variable", []string{"runtime", "list"}, map[string]string{"DROVER_WRKER_SLOTS": "3"}, exitcode.Usage, "did you mean DROVER_WORKER_SLOTS?"},
		{"open pprof", []string{"run", "--http-listen", "0.0.0.0:0"}, map[string]string{"DROVER_HTTP_PPROF": "true"}, exitcode.Usage, "http.pprof is on"},
		// A worker waits for an unreachable NATS (docs/operations.md#start-order);
		// refused credentials are a configuration error, which it does not wait out.
		{"no git, no runtime", []string{"run", "--nats-url", closed, "--work-dir", work}, nil, exitcode.Failed, "git"},
		{"credentials refused", []string{"run", "--config", okCfg, "--nats-url", ns.ClientURL(), "--work-dir", work}, runEnv, exitcode.Failed, "authorization violation"},
		{"no healthy runtime", []string{"runtime", "health"}, nil, exitcode.Failed, "no runtime is healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
			}
		})
	}
}

// TestRuntimeHealthEscapes: what a CLI prints as its version or error
// reaches the terminal escaped.
func TestRuntimeHealthEscapes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	bin := t.TempDir()
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	script := "#!/bin/sh\nprintf 'evil 1.2.3 \\033]52;c;aGk=\\007\\033[2J\\r\\n'\n"
	if err := exectest.WriteExecutable(filepath.Join(bin, "evil"), []byte(script)); err != nil {
		t.Fatal(err)
	}
	cfg := writeTemp(t, "drover.yaml", "worker:\n  runtimes: [evil]\nruntimes:\n  evil:\n    binary: evil\n")
	var term fakeTerminal
	var errb bytes.Buffer
	if code := run(t.Context(), []string{"runtime", "health", "--config", cfg}, strings.NewReader(""), &term, &errb); code != 0 {
		t.Fatalf("runtime health: %d %s\n%s", code, errb.String(), term.String())
	}
	out := term.String()
	if strings.ContainsAny(out, "\x1b\a\r") || !strings.Contains(out, `\x1b]52;c;aGk=\a`) {
		t.Errorf("runtime health on a terminal: %q", out)
	}
}
