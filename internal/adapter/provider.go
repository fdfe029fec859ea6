package adapter

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/drover-dev/drover/internal/config"
)

// Endpoint is a model endpoint a CLI is configured to reach: by a
// *_BASE_URL variable it gets, or by its own provider configuration.
type Endpoint struct {
	// URL is the endpoint as the CLI will reach it: placeholders
	// replaced, without user info.
	URL string
	// Port is the TCP port it connects to (the scheme's when the URL
	// names none).
	Port uint16
	// Source says where it is named, for people: a variable's name, or a
	// field and its file ("model_providers.mock.base_url in
	// /home/w/.codex/config.toml").
	Source string
	// Opened says the sandbox lets the CLI connect to Port because of it.
	// A file an attempt can write opens nothing: its endpoints are kept
	// only to name what the sandbox refuses.
	Opened bool
}

// providerConfig is what a runtime's CLI reads of its own provider
// configuration for one attempt (readProviderFiles): the key variables
// to pass, the endpoints it names, and what was left out and why.
type providerConfig struct {
	keys  []string
	urls  []sourcedURL
	notes []string
}

type sourcedURL struct {
	rawURL
	source string // the file (or variable, or the args) it was read from
	opened bool   // the source is one no attempt can write
}

// providerConfig reads the CLI's provider configuration for an attempt:
// in home, the HOME the CLI gets, or where env points. A source under one
// of writable — the paths the runtime's sandbox lets its CLI write, which
// an earlier attempt may have written — is not trusted: the variables it
// names are not passed (a hostile attempt could name any secret of the
// worker's for the next one), and its endpoints open no port (or any
// service on the host: 4222, the cloud's metadata on 80). The attempt's
// own HOME is not among them: its files were staged from the worker's
// HOME, which no attempt can write, just before. A configuration that
// does not parse adds nothing: the CLI fails on it and says why, and the
// note says so too.
func (a *CommandAdapter) providerConfig(env []string, home string, writable []string) providerConfig {
	var pc providerConfig
	kind := a.rt.ProviderConfig
	if kind == "" || kind == "none" {
		return pc
	}
	files, err := readProviderFiles(kind, home, env, a.rt.Args)
	if err != nil {
		pc.notes = append(pc.notes, err.Error()+"; nothing it names is passed or opened")
		return pc
	}
	var keys []string
	for _, f := range files {
		trusted := f.path == "" || !under(f.path, writable)
		if trusted {
			keys = append(keys, f.keys...)
		} else if len(f.keys) > 0 || len(f.urls) > 0 {
			pc.notes = append(pc.notes, fmt.Sprintf("adapter: %s provider configuration %s: attempts can write it (the runtime's sandbox.write), "+
				"so the variables it names are not passed and its endpoints' ports are not opened; keep it in the worker's HOME "+
				"(staged into each attempt's), or list them in env_passthrough_add and sandbox.connect", kind, f.path))
		}
		for _, u := range f.urls {
			if len(pc.urls) == maxEndpoints {
				pc.notes = append(pc.notes, fmt.Sprintf("adapter: %s provider configuration: more than %d endpoints; the rest are left out", kind, maxEndpoints))
				break
			}
			pc.urls = append(pc.urls, sourcedURL{rawURL: u, source: f.source, opened: trusted})
		}
	}
	pc.keys = keyNames(keys)
	return pc
}

// under reports whether path is one of dirs or lies beneath one.
func under(path string, dirs []string) bool {
	path = filepath.Clean(path)
	for _, d := range dirs {
		if rel, err := filepath.Rel(filepath.Clean(d), path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// endpoints resolves the configuration's endpoints as the CLI will, with
// the variables of its final environment (env), and notes each one that
// is no endpoint Drover can open a port for, and why.
func (pc providerConfig) endpoints(env map[string]string) ([]Endpoint, []string) {
	var eps []Endpoint
	var notes []string
	for _, u := range pc.urls {
		where := u.field + " in " + u.source
		text, port, err := resolveURL(u.rawURL, env)
		if err != nil {
			notes = append(notes, fmt.Sprintf("adapter: %s: %v; no port opened for it", where, err))
			continue
		}
		eps = append(eps, Endpoint{URL: text, Port: port, Source: where, Opened: u.opened})
	}
	return eps, notes
}

// dollarRef is the ${NAME} opencode replaces in a base URL (provider.ts).
var dollarRef = regexp.MustCompile(`\$\{([^}]+)\}`)

// resolveURL turns an endpoint as written into the URL the CLI reaches
// and its port. It is outside input: anything but an http(s) or ws(s) URL
// with a host and a valid port is refused, in words that do not quote it
// (a URL may carry a password).
func resolveURL(r rawURL, env map[string]string) (string, uint16, error) {
	t := r.text
	if r.expand {
		t = envRef.ReplaceAllStringFunc(t, func(m string) string { return env[envRef.FindStringSubmatch(m)[1]] })
		t = dollarRef.ReplaceAllStringFunc(t, func(m string) string {
			if v, ok := env[dollarRef.FindStringSubmatch(m)[1]]; ok {
				return v
			}
			return m
		})
		if strings.Contains(t, "{file:") {
			return "", 0, fmt.Errorf("it names a file ({file:…}), which Drover does not read")
		}
	}
	t = strings.TrimSpace(t)
	switch {
	case len(t) > maxURL:
		return "", 0, fmt.Errorf("its URL is longer than %d bytes", maxURL)
	case strings.ContainsFunc(t, unicode.IsControl):
		return "", 0, fmt.Errorf("its URL holds control characters")
	}
	u, err := url.Parse(t)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return "", 0, fmt.Errorf("it is not a URL with a host (%d bytes)", len(t))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ws", "wss":
	default:
		return "", 0, fmt.Errorf("its scheme %q is not http, https, ws or wss", printableScheme(u.Scheme))
	}
	port, err := config.ConnectPort(t)
	if err != nil {
		return "", 0, fmt.Errorf("it has no valid port")
	}
	u.User = nil
	return u.String(), port, nil
}

// printableScheme is a scheme fit for a message: short, and only the
// characters a scheme may have.
func printableScheme(s string) string {
	if len(s) > 16 {
		s = s[:16] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '+' || r == '-' || r == '.') {
			return r
		}
		return '?'
	}, s)
}

// baseURLEndpoints are the endpoints the *_BASE_URL variables of a CLI's
// environment name (ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL, …): the
// worker's own variables, passed through or set by the runtime, so their
// ports are opened.
func baseURLEndpoints(vars map[string]string) []Endpoint {
	var eps []Endpoint
	for k, v := range vars {
		if !strings.HasSuffix(k, "_BASE_URL") {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			continue
		}
		if port, err := config.ConnectPort(v); err == nil {
			u.User = nil
			eps = append(eps, Endpoint{URL: u.String(), Port: port, Source: k, Opened: true})
		}
	}
	return eps
}

// withKeys adds to env the worker's variables of names that env does not
// set already.
func withKeys(env []string, names []string) []string {
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok && !hasVar(env, name) {
			env = append(env, name+"="+v)
		}
	}
	return env
}
