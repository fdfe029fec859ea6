package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/drover-dev/drover/internal/config"
)

// Provider configurations: a CLI that reaches a model provider of the
// user's own reads the provider's key from a variable its configuration
// names, not from one Drover could list in advance (docs/runtimes.md):
// codex's model_providers.<id>.env_key, pi's models.json apiKey, opencode's
// and kilo's {env:NAME}. A runtime's provider_config says which CLI's
// configuration to read; KeyVariables reads it where the CLI will, in the
// HOME it gets (the isolated one holds the staged home_files) or where a
// variable it sees points, and the command's environment passes the
// variables it names through. Only these files are read: never the
// repository's own configuration in the worktree (an opencode.json there
// could name any variable of the worker's).

// maxConfigFile bounds what is read of one configuration file.
const maxConfigFile = 1 << 20

// varName is what a key variable's name must look like to be passed.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// configFile is one file a CLI may read its providers from, and how.
type configFile struct {
	path  string // absolute
	parse func([]byte) ([]string, error)
}

// KeyVariables returns the names of the variables the CLI's provider
// configuration names as holding keys, sorted, for a CLI whose HOME is
// home and whose environment is env (NAME=value entries). A file that is
// missing is skipped; one that cannot be read or parsed is an error, as
// the CLI would fail on it too. Names of Drover's own variables (DROVER_*)
// are never returned.
func KeyVariables(kind, home string, env []string) ([]string, error) {
	lookup := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if n, v, _ := strings.Cut(env[i], "="); n == name {
				return v
			}
		}
		return ""
	}
	files, inline := configFiles(kind, home, lookup)
	var names []string
	for _, f := range files {
		b, err := readConfig(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			var got []string
			if got, err = f.parse(b); err == nil {
				names = append(names, got...)
				continue
			}
		}
		return nil, fmt.Errorf("adapter: %s provider configuration %s: %w", kind, f.path, err)
	}
	if inline != "" {
		got, err := envRefs([]byte(inline))
		if err != nil {
			return nil, fmt.Errorf("adapter: %s provider configuration in %s_CONFIG_CONTENT: %w", kind, strings.ToUpper(kind), err)
		}
		names = append(names, got...)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !varName.MatchString(n) || strings.HasPrefix(n, "DROVER_") })
	slices.Sort(names)
	return slices.Compact(names), nil
}

// configFiles lists where each CLI reads its providers from
// (docs/runtimes.md): the files, and the inline JSONC a variable holds.
func configFiles(kind, home string, env func(string) string) (files []configFile, inline string) {
	switch kind {
	case "codex":
		// $CODEX_HOME/config.toml, CODEX_HOME defaulting to ~/.codex.
		dir := env("CODEX_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".codex")
		}
		return []configFile{{filepath.Join(dir, "config.toml"), codexKeys}}, ""
	case "pi":
		// pi-coding-agent config.ts getAgentDir: $PI_CODING_AGENT_DIR (~
		// expanded), else ~/.pi/agent; models.json and auth.json resolve
		// keys by resolveConfigValue.
		dir := env("PI_CODING_AGENT_DIR")
		switch {
		case dir == "":
			dir = filepath.Join(home, ".pi", "agent")
		case dir == "~":
			dir = home
		case strings.HasPrefix(dir, "~/"):
			dir = filepath.Join(home, dir[2:])
		}
		return []configFile{{filepath.Join(dir, "models.json"), piModelKeys}, {filepath.Join(dir, "auth.json"), piAuthKeys}}, ""
	case "opencode", "kilo":
		return openCodeFiles(kind, home, env)
	}
	return nil, ""
}

// openCodeFiles: the global configuration directory
// ($XDG_CONFIG_HOME/<cli>, else ~/.config/<cli>) and ~/.opencode, then
// <CLI>_CONFIG (a file), <CLI>_CONFIG_DIR and <CLI>_CONFIG_CONTENT
// (opencode src/config/paths.ts; kilo reads kilo.json(c) too).
func openCodeFiles(kind, home string, env func(string) string) ([]configFile, string) {
	prefix := strings.ToUpper(kind)
	names := []string{"config.json", "opencode.json", "opencode.jsonc"}
	if kind == "kilo" {
		names = append(names, "kilo.json", "kilo.jsonc")
	}
	xdg := env("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	var files []configFile
	add := func(dir string, names ...string) {
		for _, n := range names {
			files = append(files, configFile{filepath.Join(dir, n), envRefs})
		}
	}
	add(filepath.Join(xdg, kind), names...)
	add(filepath.Join(home, ".opencode"), "opencode.json", "opencode.jsonc")
	if f := env(prefix + "_CONFIG"); f != "" {
		files = append(files, configFile{f, envRefs})
	}
	if d := env(prefix + "_CONFIG_DIR"); d != "" {
		add(d, names[1:]...)
	}
	return files, env(prefix + "_CONFIG_CONTENT")
}

func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err == nil && len(b) > maxConfigFile {
		err = fmt.Errorf("larger than %d bytes", maxConfigFile)
	}
	return b, err
}

// codexKeys reads config.toml's model_providers.<id>.env_key and the
// variables its env_http_headers name (header → variable).
func codexKeys(b []byte) ([]string, error) {
	var cfg struct {
		ModelProviders map[string]struct {
			EnvKey         string            `toml:"env_key"`
			EnvHTTPHeaders map[string]string `toml:"env_http_headers"`
		} `toml:"model_providers"`
	}
	if _, err := toml.Decode(string(b), &cfg); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range cfg.ModelProviders {
		if p.EnvKey != "" {
			names = append(names, p.EnvKey)
		}
		for _, v := range p.EnvHTTPHeaders {
			names = append(names, v)
		}
	}
	return names, nil
}

// piValue is a value pi resolves by resolveConfigValue: "!command" runs a
// command, anything else is a variable's name if such a variable is set,
// else a literal. Only a name can be passed through.
func piValue(v string) (string, bool) {
	return v, v != "" && !strings.HasPrefix(v, "!") && varName.MatchString(v)
}

// piModelKeys reads models.json: each provider's apiKey and header values,
// and its models' and model overrides' header values.
func piModelKeys(b []byte) ([]string, error) {
	type headers map[string]string
	var cfg struct {
		Providers map[string]struct {
			APIKey         string                               `json:"apiKey"`
			Headers        headers                              `json:"headers"`
			Models         []struct{ Headers headers }          `json:"models"`
			ModelOverrides map[string]struct{ Headers headers } `json:"modelOverrides"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	var names []string
	take := func(vs ...string) {
		for _, v := range vs {
			if n, ok := piValue(v); ok {
				names = append(names, n)
			}
		}
	}
	for _, p := range cfg.Providers {
		take(p.APIKey)
		for _, v := range p.Headers {
			take(v)
		}
		for _, m := range p.Models {
			for _, v := range m.Headers {
				take(v)
			}
		}
		for _, m := range p.ModelOverrides {
			for _, v := range m.Headers {
				take(v)
			}
		}
	}
	return names, nil
}

// piAuthKeys reads auth.json: {"<provider>": {"type": "api_key", "key": …}}.
func piAuthKeys(b []byte) ([]string, error) {
	var auth map[string]struct {
		Type string `json:"type"`
		Key  string `json:"key"`
	}
	if err := json.Unmarshal(b, &auth); err != nil {
		return nil, err
	}
	var names []string
	for _, a := range auth {
		if n, ok := piValue(a.Key); a.Type == "api_key" && ok {
			names = append(names, n)
		}
	}
	return names, nil
}

// envRef is opencode's substitution (src/config/variable.ts): {env:NAME}.
var envRef = regexp.MustCompile(`\{env:([^}]+)\}`)

// envRefs reads a JSONC configuration and returns the variables its
// strings (keys and values, anywhere) refer to as {env:NAME}. opencode
// substitutes in the raw text, comments included; a reference in a comment
// changes nothing the CLI does, so only the parsed strings count.
func envRefs(b []byte) ([]string, error) {
	plain, err := stripJSONC(b)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(plain, &doc); err != nil {
		return nil, err
	}
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			for _, m := range envRef.FindAllStringSubmatch(v, -1) {
				names = append(names, m[1])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				walk(k)
				walk(e)
			}
		}
	}
	walk(doc)
	return names, nil
}

// HostKeyVariables is KeyVariables for a runtime's CLI as this host runs
// it with the worker's HOME and environment (what an isolated HOME is
// staged from), or nil when the runtime reads no provider configuration
// or it does not parse.
func HostKeyVariables(rt config.Runtime) []string {
	if rt.ProviderConfig == "" || rt.ProviderConfig == "none" {
		return nil
	}
	home, _ := os.UserHomeDir()
	names, _ := KeyVariables(rt.ProviderConfig, home, NewCommand("", rt).env(nil, os.TempDir()))
	return names
}
