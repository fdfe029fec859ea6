package adapter

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

func TestCommandSandbox(t *testing.T) {
	worker := t.TempDir()
	t.Setenv("HOME", worker)
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:41234")
	t.Setenv("TOOLS", "/opt/tools")
	bin := script(t, "exit 0")
	sb := config.RuntimeSandbox{
		Read:    []string{"~/.config/cli", "$TOOLS/share", "$UNSET_VAR/x", "/etc/cli"},
		Write:   []string{"~/.cache/cli"},
		Connect: []string{"443", "https://api.example.com:8443"},
		Bind:    []int{0},
	}
	pass := []string{"ANTHROPIC_BASE_URL", "TOOLS"}

	tmp := t.TempDir()
	isolated, err := NewCommand("x", config.Runtime{Binary: bin, Input: "file", Home: "isolated", Sandbox: sb, EnvPassthrough: pass}).
		Command(&Input{Prompt: "p", TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	s := isolated.Sandbox
	if want := []string{filepath.Join(tmp, "tmp"), home, filepath.Join(home, ".cache/cli")}; !slices.Equal(s.Write, want) {
		t.Errorf("write %q, want %q", s.Write, want)
	}
	if want := []string{filepath.Join(tmp, "prompt.md"), filepath.Join(home, ".config/cli"), "/opt/tools/share", "/etc/cli"}; !slices.Equal(s.Read, want) {
		t.Errorf("read %q, want %q", s.Read, want)
	}
	if want := []uint16{443, 8443, 41234}; !slices.Equal(s.Connect, want) {
		t.Errorf("connect %v, want %v (the base URL's port added)", s.Connect, want)
	}
	if !slices.Equal(s.Bind, []uint16{0}) || len(s.Deny) != 0 {
		t.Errorf("bind %v, deny %q", s.Bind, s.Deny)
	}

	// With the worker's HOME it may read it, not write it, and not reach
	// the credentials in it.
	onWorker, err := NewCommand("x", config.Runtime{Binary: bin, Home: "worker", Sandbox: sb}).Command(&Input{Prompt: "p", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s = onWorker.Sandbox
	if !slices.Contains(s.Read, worker) || slices.Contains(s.Write, worker) || !slices.Contains(s.Deny, filepath.Join(worker, ".ssh")) {
		t.Errorf("worker HOME: read %q write %q deny %q", s.Read, s.Write, s.Deny)
	}
	if !slices.Equal(s.Connect, []uint16{443, 8443}) {
		t.Errorf("connect %v: the base URL is not passed to this runtime, its port must not be allowed", s.Connect)
	}
}
