package adapter

import (
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
	// the ports of the endpoints it is configured to reach (Endpoints
	// that are Opened), its sandbox.bind.
	Connect, Bind []uint16
	// Endpoints are the model endpoints its *_BASE_URL variables and its
	// provider configuration name, also those that opened no port, so
	// that what the sandbox refuses can be named.
	Endpoints []Endpoint
	// Notes say what of its provider configuration was left out, and
	// why: a file attempts can write, an endpoint that is no URL.
	Notes []string
}

// sandboxNeeds works out a command's Sandbox from its final environment
// and the endpoints its provider configuration names (eps). ownHome is the
// HOME made for this attempt ("" when it runs with another), tmp its
// TMPDIR, prompt the prompt file ("" when there is none).
func sandboxNeeds(rt config.RuntimeSandbox, env []string, ownHome, tmp, prompt string, eps []Endpoint) Sandbox {
	vars := varMap(env)
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
	// A model endpoint named by the environment, or by a configuration no
	// attempt can write, is where the CLI must go.
	s.Endpoints = append(baseURLEndpoints(vars), eps...)
	for _, e := range s.Endpoints {
		if e.Opened {
			s.Connect = append(s.Connect, e.Port)
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

// varMap is env's NAME=value entries by name.
func varMap(env []string) map[string]string {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return vars
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
