package adapter

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/sandbox"
)

// Sandbox is what a CLI may reach as its runtime and its environment say;
// the attempt adds its worktree and repository (internal/attempt).
type Sandbox struct {
	// Read are paths it may read and execute beneath: the prompt file, the
	// worker's HOME when it runs with it, the runtime's sandbox.read.
	Read []string
	// Write are paths it may change: its TMPDIR, its own HOME, the
	// runtime's sandbox.write.
	Write []string
	// Deny are paths it must not reach even where Read grants them: the
	// credentials in the worker's HOME.
	Deny []string
	// Connect and Bind are TCP ports: the runtime's sandbox.connect and
	// the ports of the *_BASE_URL variables it gets, its sandbox.bind.
	Connect, Bind []uint16
}

// sandboxNeeds works out a command's Sandbox from its final environment.
// ownHome is the HOME made for this attempt ("" when it runs with another),
// tmp its TMPDIR, prompt the prompt file ("" when there is none).
func sandboxNeeds(rt config.RuntimeSandbox, env []string, ownHome, tmp, prompt string) Sandbox {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	s := Sandbox{Write: []string{tmp}}
	home := vars["HOME"]
	switch {
	case ownHome != "":
		s.Write = append(s.Write, ownHome)
	case filepath.IsAbs(home):
		s.Read = append(s.Read, home)
		s.Deny = sandbox.HomeSecrets(home)
	}
	if prompt != "" {
		s.Read = append(s.Read, prompt)
	}
	s.Read = append(s.Read, expandPaths(rt.Read, home, vars)...)
	s.Write = append(s.Write, expandPaths(rt.Write, home, vars)...)
	for _, e := range rt.Connect {
		if p, err := config.ConnectPort(e); err == nil {
			s.Connect = append(s.Connect, p)
		}
	}
	// A model endpoint named by the environment is where the CLI must go.
	for k, v := range vars {
		if strings.HasSuffix(k, "_BASE_URL") {
			if u, err := url.Parse(v); err == nil && u.Host != "" {
				if p, err := config.ConnectPort(v); err == nil {
					s.Connect = append(s.Connect, p)
				}
			}
		}
	}
	for _, p := range rt.Bind {
		if p >= 0 && p <= 65535 {
			s.Bind = append(s.Bind, uint16(p))
		}
	}
	slices.Sort(s.Connect)
	s.Connect = slices.Compact(s.Connect)
	return s
}

// expandPaths resolves a runtime's sandbox paths: ~ is the CLI's HOME,
// $VAR (or ${VAR}) a variable of its environment; an entry whose variable
// is unset, or that is not absolute once expanded, is left out.
func expandPaths(paths []string, home string, vars map[string]string) []string {
	var out []string
	for _, p := range paths {
		if p == "~" || strings.HasPrefix(p, "~/") {
			if home == "" {
				continue
			}
			p = home + p[1:]
		}
		missing := false
		p = os.Expand(p, func(k string) string {
			v, ok := vars[k]
			missing = missing || !ok || v == ""
			return v
		})
		if !missing && filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}
