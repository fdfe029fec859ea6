package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Sandbox modes of worker.sandbox.
const (
	SandboxOn  = "on"
	SandboxOff = "off"
)

// RuntimeSandbox is what a runtime's processes may reach beyond what every
// attempt gets (its worktree, TMPDIR and HOME, the system's programs,
// docs/security.md). Lists add to a built-in runtime's, never replace them.
type RuntimeSandbox struct {
	// Read are paths the CLI may read (and execute beneath): absolute, or
	// "~/…" for the CLI's HOME, or "$VAR/…" for a variable of its
	// environment (skipped when unset). The worker's secrets stay out of
	// reach whatever is listed. Defaults to none.
	Read []string `mapstructure:"read"`
	// Write are paths the CLI may change, written like Read. Defaults to none.
	Write []string `mapstructure:"write"`
	// Connect are the TCP ports the CLI may connect to: a port ("443") or
	// a URL whose port counts ("https://api.example.com:8443"). The ports
	// of the *_BASE_URL variables the CLI gets, and of the endpoints its
	// provider_config names, are added. Defaults to 443 for the built-in
	// CLIs, none for others.
	Connect []string `mapstructure:"connect"`
	// Bind are the TCP ports the CLI may listen on; 0 is any port the
	// kernel picks. Defaults to none.
	Bind []int `mapstructure:"bind"`
}

// merged returns s with over's entries added.
func (s RuntimeSandbox) merged(over RuntimeSandbox) RuntimeSandbox {
	add := func(a, b []string) []string {
		out := slices.Clone(a)
		for _, v := range b {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
	s.Read, s.Write, s.Connect = add(s.Read, over.Read), add(s.Write, over.Write), add(s.Connect, over.Connect)
	for _, p := range over.Bind {
		if !slices.Contains(s.Bind, p) {
			s.Bind = append(s.Bind, p)
		}
	}
	return s
}

// ConnectPort is the TCP port a connect entry names: the number, or a URL's
// port (its scheme's when it has none: 443 for https and wss, 80 for http
// and ws).
func ConnectPort(entry string) (uint16, error) {
	if n, err := strconv.Atoi(entry); err == nil {
		if n < 1 || n > 65535 {
			return 0, fmt.Errorf("port %d is not 1..65535", n)
		}
		return uint16(n), nil
	}
	u, err := url.Parse(entry)
	if err != nil || u.Host == "" {
		return 0, fmt.Errorf("%q is neither a port nor a URL with a host", entry)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("%q has no valid port", entry)
		}
		return uint16(n), nil
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "wss":
		return 443, nil
	case "http", "ws":
		return 80, nil
	}
	return 0, fmt.Errorf("%q has no port, and its scheme %q has no default", entry, u.Scheme)
}

// normaliseSandbox reads worker.sandbox's spellings (a YAML boolean
// arrives as true/false) as on or off; "" is on.
func normaliseSandbox(v string) string {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "on", "true", "1", "yes":
		return SandboxOn
	case "off", "false", "0", "no":
		return SandboxOff
	}
	return v
}

func (c *Config) validateSandbox(bad func(string, string, ...any)) {
	if c.Worker.Sandbox != SandboxOn && c.Worker.Sandbox != SandboxOff {
		bad("worker.sandbox", "must be on or off (got %q)", c.Worker.Sandbox)
	}
	for _, name := range c.RuntimeNames() {
		s, key := c.Runtimes[name].Sandbox, "runtimes."+name+".sandbox"
		for field, paths := range map[string][]string{"read": s.Read, "write": s.Write} {
			for _, p := range paths {
				if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~/") && p != "~" && !strings.HasPrefix(p, "$") {
					bad(key+"."+field, "%q must be absolute, or start with ~/ or $VAR", p)
				}
			}
		}
		for _, e := range s.Connect {
			if _, err := ConnectPort(e); err != nil {
				bad(key+".connect", "%v", err)
			}
		}
		for _, p := range s.Bind {
			if p < 0 || p > 65535 {
				bad(key+".bind", "port %d is not 0..65535", p)
			}
		}
	}
}

// withBuiltinSandboxes gives the built-in CLIs their sandbox defaults.
func withBuiltinSandboxes(rts map[string]Runtime) map[string]Runtime {
	// The built-in CLIs talk to their models over HTTPS; a *_BASE_URL variable
	// they get adds its port. Their own HOME and TMPDIR cover their
	// caches and temp files; a config or state dir the worker's
	// environment points them at (passed through) is theirs too
	// (docs/security.md has each one's policy).
	for name, sb := range map[string]RuntimeSandbox{
		"claude-code": {},
		"codex":       {Write: []string{"$CODEX_HOME"}},
		"opencode":    {Read: []string{"$OPENCODE_CONFIG"}},
		"kilo":        {Read: []string{"$KILO_CONFIG"}},
		"gemini":      {},
		"pi":          {Write: []string{"$PI_CODING_AGENT_DIR"}},
		"copilot":     {},
	} {
		rt := rts[name]
		sb.Connect = []string{"443"}
		rt.Sandbox = sb
		rts[name] = rt
	}
	return rts
}

// SandboxDeny are the worker's secrets, which no confined process may
// reach whatever its runtime's sandbox grants: the configuration file, the
// NATS credentials, keys and the embedded server's configuration, the data
// dir (the controller's store, the embedded server's files) and the
// worker's work dir (other attempts' worktrees, HOMEs and temp dirs, the
// repo caches), of which an attempt is given its own paths back.
func (c *Config) SandboxDeny() []string {
	var out []string
	for _, p := range []string{c.File, c.NATS.NKeyFile, c.NATS.CredsFile, c.NATS.TLS.KeyFile, c.NATS.TLS.CertFile,
		c.NATS.TLS.CAFile, c.NATS.ServerConfig, c.DataDir, c.Worker.WorkDir} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	if env := os.Getenv("DROVER_CONFIG"); env != "" && env != c.File {
		if abs, err := filepath.Abs(env); err == nil {
			out = append(out, abs)
		}
	}
	return out
}
