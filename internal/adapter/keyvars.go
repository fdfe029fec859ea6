package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"

	"github.com/drover-dev/drover/internal/config"
)

// Provider configurations: a CLI that reaches a model provider of the
// user's own reads the provider's key from a variable its configuration
// names, not from one Drover could list in advance (docs/runtimes.md):
// codex's model_providers.<id>.env_key, pi's models.json apiKey, opencode's
// and kilo's {env:NAME}; and the provider's endpoint from the same place
// (codex's base_url, pi's baseUrl, opencode's and kilo's options.baseURL),
// which the sandbox must let it reach. A runtime's provider_config says
// which CLI's configuration to read; ReadProviderConfig reads it where the
// CLI will, in the HOME it gets (the isolated one holds the staged
// home_files) or where a variable it sees points, and the command passes
// the variables it names through and opens the ports of the endpoints
// (provider.go). Only these files are read: never the repository's own
// configuration in the worktree (an opencode.json there could name any
// variable of the worker's, any port).

// Bounds of what is read of a CLI's configuration.
const (
	maxConfigFile = 1 << 20 // bytes of one file
	maxEndpoints  = 64      // endpoints kept of one CLI's configuration
	maxURL        = 2048    // bytes of one endpoint's URL
)

// varName is what a key variable's name must look like to be passed.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// configFile is one file a CLI may read its providers from, and how.
type configFile struct {
	path  string // absolute
	parse func([]byte) (named, error)
}

// named is what one configuration file names: key variables, and model
// endpoints as written.
type named struct {
	keys []string
	urls []rawURL
}

// rawURL is an endpoint as a configuration writes it: the field that
// holds it (model_providers.mock.base_url) and its text, placeholders
// unreplaced.
type rawURL struct {
	field, text string
	// opencode replaces {env:NAME} in its configuration's text and
	// ${NAME} in a base URL with the variables it sees; codex and pi take
	// the text as it is.
	expand bool
}

// KeyVariables returns the names of the variables the CLI's provider
// configuration names as holding keys, sorted, for a CLI whose HOME is
// home and whose environment is env (NAME=value entries), from every file
// the CLI reads (ReadProviderConfig's Keys before any file is left out as
// untrusted). A file that is missing is skipped; one that cannot be read
// or parsed is an error, as the CLI would fail on it too. Names of
// Drover's own variables (DROVER_*) are never returned.
func KeyVariables(kind, home string, env []string) ([]string, error) {
	files, err := readProviderFiles(kind, home, env, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		names = append(names, f.keys...)
	}
	return keyNames(names), nil
}

// keyNames keeps the names that can be a variable's and are not Drover's,
// sorted, each once.
func keyNames(names []string) []string {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !varName.MatchString(n) || strings.HasPrefix(n, "DROVER_") })
	slices.Sort(names)
	return slices.Compact(names)
}

// readFile is what one source of a CLI's configuration named: a file
// (path), the inline configuration of a variable, or the command line.
type readFile struct {
	path   string // the file; "" for a variable or an argument
	source string // how messages name it: the path, or e.g. OPENCODE_CONFIG_CONTENT
	named
}

// readProviderFiles reads each source of a CLI's provider configuration
// that exists, in the order the CLI reads them. args are the runtime's
// configured arguments (codex's -c overrides).
func readProviderFiles(kind, home string, env []string, args []string) ([]readFile, error) {
	lookup := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if n, v, _ := strings.Cut(env[i], "="); n == name {
				return v
			}
		}
		return ""
	}
	files, inline := configFiles(kind, home, lookup)
	var out []readFile
	for _, f := range files {
		b, err := readConfig(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var got named
		if err == nil {
			got, err = f.parse(b)
		}
		if err != nil {
			return nil, fmt.Errorf("adapter: %s provider configuration %s: %w", kind, f.path, err)
		}
		out = append(out, readFile{path: f.path, source: f.path, named: got})
	}
	if inline != "" {
		name := strings.ToUpper(kind) + "_CONFIG_CONTENT"
		if len(inline) > maxConfigFile {
			return nil, fmt.Errorf("adapter: %s provider configuration in %s: larger than %d bytes", kind, name, maxConfigFile)
		}
		got, err := openCodeNamed([]byte(inline))
		if err != nil {
			return nil, fmt.Errorf("adapter: %s provider configuration in %s: %w", kind, name, err)
		}
		out = append(out, readFile{source: name, named: got})
	}
	if kind == "codex" {
		if got := codexArgs(args); len(got.urls) > 0 {
			out = append(out, readFile{source: "the runtime's args", named: got})
		}
	}
	return out, nil
}

// configFiles lists where each CLI reads its providers from
// (docs/runtimes.md): the files, and the inline JSONC a variable holds.
func configFiles(kind, home string, env func(string) string) (files []configFile, inline string) {
	switch kind {
	case "codex":
		// The system's layers under /etc/codex, then the user's
		// $CODEX_HOME/config.toml, CODEX_HOME defaulting to ~/.codex
		// (codex 0.169.0 config loader). A project's .codex/config.toml
		// cannot name a provider or a base URL: codex ignores them there.
		dir := env("CODEX_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".codex")
		}
		return []configFile{
			{"/etc/codex/config.toml", codexNamed},
			{"/etc/codex/managed_config.toml", codexNamed},
			{filepath.Join(dir, "config.toml"), codexNamed},
		}, ""
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
		return []configFile{{filepath.Join(dir, "models.json"), piModelNamed}, {filepath.Join(dir, "auth.json"), piAuthNamed}}, ""
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
			files = append(files, configFile{filepath.Join(dir, n), openCodeNamed})
		}
	}
	add(filepath.Join(xdg, kind), names...)
	add(filepath.Join(home, ".opencode"), "opencode.json", "opencode.jsonc")
	if f := env(prefix + "_CONFIG"); f != "" {
		files = append(files, configFile{f, openCodeNamed})
	}
	if d := env(prefix + "_CONFIG_DIR"); d != "" {
		add(d, names[1:]...)
	}
	return files, env(prefix + "_CONFIG_CONTENT")
}

// readConfig reads one configuration file, at most maxConfigFile bytes of
// it. Only a regular file is read: a FIFO or a device put in its place
// (its directory may be one an attempt can write) would block the worker
// or never end, and is refused without waiting.
func readConfig(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err == nil && len(b) > maxConfigFile {
		err = fmt.Errorf("larger than %d bytes", maxConfigFile)
	}
	return b, err
}

// syntaxError says where a configuration does not parse, without quoting
// it: the file may not be what its name says (a key file linked in its
// place), and a message travels further than the file.
func syntaxError(format string, err error) error {
	var te toml.ParseError
	var se *json.SyntaxError
	var ue *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("not valid %s: line %d", format, te.Position.Line)
	case errors.As(err, &se):
		return fmt.Errorf("not valid %s: at byte %d", format, se.Offset)
	case errors.As(err, &ue):
		return fmt.Errorf("not valid %s: %s is %s, not %s", format, ue.Field, ue.Value, ue.Type)
	case errors.Is(err, errJSONC):
		return err
	}
	return fmt.Errorf("not valid %s", format)
}

// codexNamed reads config.toml: model_providers.<id>.env_key and the
// variables its env_http_headers name (header → variable); the endpoints
// model_providers.<id>.base_url, openai_base_url and chatgpt_base_url (at
// the top and in a profile), and the built-in local providers a
// model_provider or oss_provider names (codexLocal).
func codexNamed(b []byte) (named, error) {
	type base struct {
		OpenAIBaseURL  string `toml:"openai_base_url"`
		ChatGPTBaseURL string `toml:"chatgpt_base_url"`
		ModelProvider  string `toml:"model_provider"`
		OSSProvider    string `toml:"oss_provider"`
	}
	var cfg struct {
		base
		ModelProviders map[string]struct {
			BaseURL        string            `toml:"base_url"`
			EnvKey         string            `toml:"env_key"`
			EnvHTTPHeaders map[string]string `toml:"env_http_headers"`
		} `toml:"model_providers"`
		Profiles map[string]base `toml:"profiles"`
	}
	if _, err := toml.Decode(string(b), &cfg); err != nil {
		return named{}, syntaxError("TOML", err)
	}
	var n named
	for _, id := range slices.Sorted(maps.Keys(cfg.ModelProviders)) {
		p := cfg.ModelProviders[id]
		if p.EnvKey != "" {
			n.keys = append(n.keys, p.EnvKey)
		}
		for _, h := range slices.Sorted(maps.Keys(p.EnvHTTPHeaders)) {
			// An empty variable name names nothing codex would read.
			if v := p.EnvHTTPHeaders[h]; v != "" {
				n.keys = append(n.keys, v)
			}
		}
		n.url("model_providers."+id+".base_url", p.BaseURL, false)
	}
	bases := map[string]base{"": cfg.base}
	for id, p := range cfg.Profiles {
		bases["profiles."+id+"."] = p
	}
	for _, at := range slices.Sorted(maps.Keys(bases)) {
		p := bases[at]
		n.url(at+"openai_base_url", p.OpenAIBaseURL, false)
		n.url(at+"chatgpt_base_url", p.ChatGPTBaseURL, false)
		n.url(at+"model_provider", codexLocal[p.ModelProvider], false)
		n.url(at+"oss_provider", codexLocal[p.OSSProvider], false)
	}
	return n, nil
}

// codexLocal are codex's built-in local providers (model_provider_info.rs:
// DEFAULT_OLLAMA_PORT, DEFAULT_LMSTUDIO_PORT), reached where
// CODEX_OSS_BASE_URL says if codex sees it (a *_BASE_URL variable, whose
// port is opened by itself), else on these.
var codexLocal = map[string]string{
	"ollama":   "http://localhost:11434/v1",
	"lmstudio": "http://localhost:1234/v1",
}

// url adds an endpoint, unless text is empty.
func (n *named) url(field, text string, expand bool) {
	if text != "" {
		n.urls = append(n.urls, rawURL{field: field, text: text, expand: expand})
	}
}

// codexArgs reads the endpoints a runtime's arguments set with codex's
// -c/--config key=value overrides: the value is TOML, or else a string
// as it is (codex's own rule).
func codexArgs(args []string) named {
	var n named
	for i := 0; i < len(args); i++ {
		kv, ok := strings.CutPrefix(args[i], "--config=")
		if !ok && (args[i] == "-c" || args[i] == "--config") && i+1 < len(args) {
			i++
			kv, ok = args[i], true
		}
		key, val, found := strings.Cut(kv, "=")
		if !ok || !found {
			continue
		}
		key = strings.TrimSpace(key)
		if key != "openai_base_url" && key != "chatgpt_base_url" &&
			!(strings.HasPrefix(key, "model_providers.") && strings.HasSuffix(key, ".base_url")) {
			continue
		}
		var v struct{ V string }
		if _, err := toml.Decode("V = "+val, &v); err != nil {
			v.V = val
		}
		n.url("-c "+key, v.V, false)
	}
	return n
}

// piValue is a value pi resolves by resolveConfigValue: "!command" runs a
// command, anything else is a variable's name if such a variable is set,
// else a literal. Only a name can be passed through.
func piValue(v string) (string, bool) {
	return v, v != "" && !strings.HasPrefix(v, "!") && varName.MatchString(v)
}

// piModelNamed reads models.json (JSON with comments, which pi strips):
// each provider's apiKey and header values, and its models' and model
// overrides' header values; the endpoints, each provider's baseUrl and
// each of its models' (model-registry.js: a model's own, else its
// provider's).
func piModelNamed(b []byte) (named, error) {
	type headers map[string]string
	var cfg struct {
		Providers map[string]struct {
			BaseURL string  `json:"baseUrl"`
			APIKey  string  `json:"apiKey"`
			Headers headers `json:"headers"`
			Models  []struct {
				BaseURL string  `json:"baseUrl"`
				Headers headers `json:"headers"`
			} `json:"models"`
			ModelOverrides map[string]struct{ Headers headers } `json:"modelOverrides"`
		} `json:"providers"`
	}
	plain, err := stripJSONC(b)
	if err == nil {
		err = json.Unmarshal(plain, &cfg)
	}
	if err != nil {
		return named{}, syntaxError("JSON", err)
	}
	var n named
	take := func(vs ...string) {
		for _, v := range vs {
			if name, ok := piValue(v); ok {
				n.keys = append(n.keys, name)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.Providers)) {
		p := cfg.Providers[id]
		take(p.APIKey)
		n.url("providers."+id+".baseUrl", p.BaseURL, false)
		for _, v := range p.Headers {
			take(v)
		}
		for i, m := range p.Models {
			for _, v := range m.Headers {
				take(v)
			}
			n.url(fmt.Sprintf("providers.%s.models[%d].baseUrl", id, i), m.BaseURL, false)
		}
		for _, m := range p.ModelOverrides {
			for _, v := range m.Headers {
				take(v)
			}
		}
	}
	return n, nil
}

// piAuthNamed reads auth.json: {"<provider>": {"type": "api_key", "key": …}}.
func piAuthNamed(b []byte) (named, error) {
	var auth map[string]struct {
		Type string `json:"type"`
		Key  string `json:"key"`
	}
	if err := json.Unmarshal(b, &auth); err != nil {
		return named{}, syntaxError("JSON", err)
	}
	var n named
	for _, a := range auth {
		if name, ok := piValue(a.Key); a.Type == "api_key" && ok {
			n.keys = append(n.keys, name)
		}
	}
	return n, nil
}

// envRef is opencode's substitution (src/config/variable.ts): {env:NAME}.
var envRef = regexp.MustCompile(`\{env:([^}]+)\}`)

// openCodeNamed reads an opencode or kilo configuration, JSONC: the
// variables its strings (keys and values, anywhere) refer to as
// {env:NAME}; and each provider's endpoint, as provider.ts finds it:
// options.baseURL when it is a string, else a model's provider.api, else
// the provider's api (the rest come from models.dev: HTTPS). opencode
// substitutes {env:NAME} in the raw text, comments included; a reference
// in a comment changes nothing the CLI does, so only the parsed strings
// count.
func openCodeNamed(b []byte) (named, error) {
	plain, err := stripJSONC(b)
	if err != nil {
		return named{}, err
	}
	var doc any
	if err := json.Unmarshal(plain, &doc); err != nil {
		return named{}, syntaxError("JSON", err)
	}
	var n named
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			for _, m := range envRef.FindAllStringSubmatch(v, -1) {
				n.keys = append(n.keys, m[1])
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
	providers, _ := field[map[string]any](doc, "provider")
	for _, id := range slices.Sorted(maps.Keys(providers)) {
		at := "provider." + id
		if u, ok := field[string](providers[id], "options", "baseURL"); ok {
			n.url(at+".options.baseURL", u, true)
		}
		if u, ok := field[string](providers[id], "api"); ok {
			n.url(at+".api", u, true)
		}
		models, _ := field[map[string]any](providers[id], "models")
		for _, m := range slices.Sorted(maps.Keys(models)) {
			if u, ok := field[string](models[m], "provider", "api"); ok {
				n.url(at+".models."+m+".provider.api", u, true)
			}
		}
	}
	return n, nil
}

// field is the value at path in a decoded JSON document, if it is a T.
func field[T any](doc any, path ...string) (T, bool) {
	for _, k := range path {
		m, ok := doc.(map[string]any)
		if !ok {
			var zero T
			return zero, false
		}
		doc = m[k]
	}
	v, ok := doc.(T)
	return v, ok
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
