package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSandboxMode(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker.Sandbox != SandboxOn || c.Runtimes["claude-code"].Home != "isolated" || c.Runtimes["demo"].Home != "isolated" {
		t.Errorf("defaults: sandbox %q, homes %q %q; want on and isolated HOMEs", c.Worker.Sandbox,
			c.Runtimes["claude-code"].Home, c.Runtimes["demo"].Home)
	}
	for _, tc := range []struct{ yaml, env, want string }{
		{"worker:\n  sandbox: off\n", "", SandboxOff},
		{"worker:\n  sandbox: false\n", "", SandboxOff},
		{"worker:\n  sandbox: on\n", "", SandboxOn},
		{"", "off", SandboxOff},
		{"", "true", SandboxOn},
		{"worker:\n  sandbox: on\n", "off", SandboxOff},
	} {
		t.Run(tc.yaml+"|"+tc.env, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			if tc.env != "" {
				t.Setenv("DROVER_WORKER_SANDBOX", tc.env)
			}
			c, err := Load(LoadOptions{File: writeFile(t, tc.yaml+"log: {level: info}\n")})
			if err != nil || c.Worker.Sandbox != tc.want {
				t.Fatalf("sandbox %v, %v; want %s", c, err, tc.want)
			}
			// Off keeps the worker's HOME for runtimes that say nothing.
			if wantHome := map[string]string{SandboxOn: "isolated", SandboxOff: "worker"}[tc.want]; c.Runtimes["codex"].Home != wantHome {
				t.Errorf("codex home %q, want %s", c.Runtimes["codex"].Home, wantHome)
			}
		})
	}
	t.Setenv("DROVER_WORKER_SANDBOX", "maybe")
	if _, err := Load(LoadOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "worker.sandbox: must be on or off") {
		t.Errorf("bad mode: %v", err)
	}
}

func TestRuntimeSandbox(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	file := writeFile(t, `runtimes:
  claude-code:
    sandbox:
      read: [/opt/models, "~/.config/claude"]
      connect: [8443]
  custom:
    binary: tool
    home: worker
    sandbox:
      write: ["$CACHE_DIR/tool"]
      connect: ["https://api.example.com", "http://10.0.0.1:8080"]
      bind: [0, 3000]
`)
	t.Setenv("DROVER_RUNTIMES_CODEX_SANDBOX_CONNECT", "9443")
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	claude := c.Runtimes["claude-code"].Sandbox
	if !slices.Equal(claude.Connect, []string{"443", "8443"}) || !slices.Equal(claude.Read, []string{"/opt/models", "~/.config/claude"}) {
		t.Errorf("claude-code: configured entries must add to the built-in's: %+v", claude)
	}
	if codex := c.Runtimes["codex"].Sandbox; !slices.Equal(codex.Connect, []string{"443", "9443"}) {
		t.Errorf("codex from the environment: %+v", codex)
	}
	custom := c.Runtimes["custom"]
	if custom.Home != "worker" || !slices.Equal(custom.Sandbox.Write, []string{"$CACHE_DIR/tool"}) ||
		!slices.Equal(custom.Sandbox.Bind, []int{0, 3000}) || len(custom.Sandbox.Connect) != 2 {
		t.Errorf("custom: %+v", custom)
	}
	if d := c.Runtimes["demo"].Sandbox; len(d.Connect)+len(d.Read)+len(d.Write)+len(d.Bind) != 0 {
		t.Errorf("the demo agent needs no network: %+v", d)
	}

	bad := writeFile(t, `runtimes:
  custom:
    binary: tool
    sandbox:
      read: [relative/path]
      write: ["../up"]
      connect: [70000, "ftp://host", "not a url"]
      bind: [-1]
`)
	_, err = Load(LoadOptions{File: bad})
	for _, want := range []string{
		`runtimes.custom.sandbox.read: "relative/path" must be absolute`,
		`runtimes.custom.sandbox.write: "../up" must be absolute`,
		"runtimes.custom.sandbox.connect: port 70000 is not 1..65535",
		`runtimes.custom.sandbox.connect: "ftp://host" has no port`,
		`runtimes.custom.sandbox.connect: "not a url" is neither a port nor a URL`,
		"runtimes.custom.sandbox.bind: port -1",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestConnectPort(t *testing.T) {
	for in, want := range map[string]uint16{"443": 443, "https://h": 443, "wss://h/x": 443, "http://h": 80,
		"http://127.0.0.1:34567/v1": 34567, "https://[::1]:8443": 8443} {
		if got, err := ConnectPort(in); err != nil || got != want {
			t.Errorf("ConnectPort(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "65536", "", "h:80", "ssh://h", "https://h:0", "https://h:99999"} {
		if _, err := ConnectPort(in); err == nil {
			t.Errorf("ConnectPort(%q) accepted", in)
		}
	}
}

func TestSandboxDeny(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	nkey := filepath.Join(dir, "worker.nk")
	if err := os.WriteFile(nkey, []byte("SUAxxx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "data_dir: "+filepath.Join(dir, "data")+"\nnats:\n  nkey_file: "+nkey+"\n")
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	deny := c.SandboxDeny()
	for _, want := range []string{file, nkey, filepath.Join(dir, "data"), filepath.Join(dir, "data", "worker")} {
		if !slices.Contains(deny, want) {
			t.Errorf("%s is not denied: %q", want, deny)
		}
	}
}
