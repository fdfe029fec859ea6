package native

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/native/anthropic"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/openai"
	"github.com/drover-dev/drover/internal/native/tools"
	"github.com/drover-dev/drover/internal/supervise"
)

// Config is one native runtime, as package config fills it (see
// config.NativeRuntime for what each field means and its default).
type Config struct {
	Provider  string
	BaseURL   string
	APIKeyEnv string
	Model     string
	// MaxTokens caps one turn's output.
	MaxTokens int64
	// MaxRetries is how often a transiently failed turn is tried again.
	MaxRetries int
	Budget     Budget
	Price      Price
	// Timeout is an attempt's timeout when the attempt sets none.
	Timeout time.Duration
	// Grace is how long a stopped command has between SIGTERM and SIGKILL.
	Grace time.Duration
	// CommandTimeout is a shell command's timeout when the model sets none.
	CommandTimeout time.Duration
	// Limits are every shell command's resource limits.
	Limits supervise.Limits
	// Env are fixed NAME=value variables for commands; EnvPassthrough names
	// worker variables they may see.
	Env, EnvPassthrough []string
	// RetryBackoff and RetryMaxWait shape the waits between tries of a
	// turn: RetryBackoff doubled each time, or what the provider asked
	// for, never more than RetryMaxWait. Default to 1s and 30s.
	RetryBackoff, RetryMaxWait time.Duration
}

// ConfigFrom reads a runtime's configuration. config.Load has filled the
// defaults and validated it.
func ConfigFrom(rt config.Runtime) Config {
	n := rt.NativeRuntime
	c := Config{
		Provider: n.Provider, BaseURL: n.BaseURL, APIKeyEnv: n.APIKeyEnv, Model: rt.Model,
		MaxTokens: n.MaxTokens, CommandTimeout: n.CommandTimeout, Timeout: rt.Timeout, Grace: rt.Grace,
		Limits: supervise.Limits(rt.Limits), Env: rt.Env, EnvPassthrough: rt.EnvPassthrough,
		Budget: Budget{Turns: n.Budget.Turns, Tokens: n.Budget.Tokens, InputTokens: n.Budget.InputTokens,
			OutputTokens: n.Budget.OutputTokens, Time: n.Budget.Time},
		Price: Price{Input: n.Price.Input, Output: n.Price.Output, CacheRead: n.Price.CacheRead, CacheWrite: n.Price.CacheWrite},
	}
	if n.MaxRetries != nil {
		c.MaxRetries = *n.MaxRetries
	}
	return c.WithDefaults()
}

// WithDefaults returns c with zero fields defaulted.
func (c Config) WithDefaults() Config {
	if c.MaxTokens <= 0 {
		c.MaxTokens = 16384
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = time.Second
	}
	if c.RetryMaxWait <= 0 {
		c.RetryMaxWait = 30 * time.Second
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	return c
}

// Runtime is one configured native runtime. It is safe for concurrent use:
// a worker runs several attempts of one runtime at once, each with its own
// loop and tools, sharing the model client.
type Runtime struct {
	name   string
	cfg    Config
	client model.Client
	clock  Clock
	// keyMissing is set when api_key_env names a variable this worker
	// does not have.
	keyMissing bool

	mu   sync.Mutex
	info *adapter.Info
}

// The runtime answers health checks as an adapter does.
var _ adapter.HealthChecker = (*Runtime)(nil)

// ErrKeyMissing means the worker lacks the runtime's API key variable.
var ErrKeyMissing = errors.New("native: API key not set")

// New builds a runtime from its configuration: the provider's client, with
// the key read from the worker's environment now.
func New(name string, rt config.Runtime) (*Runtime, error) {
	cfg := ConfigFrom(rt)
	key := ""
	missing := false
	if cfg.APIKeyEnv != "" {
		key = os.Getenv(cfg.APIKeyEnv)
		missing = key == ""
	}
	client, err := NewClient(cfg, key, nil)
	if err != nil {
		return nil, fmt.Errorf("native: runtime %s: %w", name, err)
	}
	r := NewRuntime(name, cfg, client)
	r.keyMissing = missing
	return r, nil
}

// NewClient builds the model client a configuration names. A nil hc uses
// a client made for long streams: connection and header timeouts, no
// overall timeout.
func NewClient(cfg Config, key string, hc *http.Client) (model.Client, error) {
	if hc == nil {
		hc = defaultHTTPClient()
	}
	o := model.ClientOptions{BaseURL: cfg.BaseURL, APIKey: key, Model: cfg.Model, HTTPClient: hc}
	switch cfg.Provider {
	case "anthropic":
		return anthropic.New(o), nil
	case "openai-responses":
		return openai.NewResponses(o), nil
	case "openai-chat":
		return openai.NewChat(o), nil
	}
	return nil, fmt.Errorf("unknown provider %q", cfg.Provider)
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute, // a long prompt may take a while to start streaming
	}}
}

// NewRuntime is a runtime over a given client (a mock in tests).
func NewRuntime(name string, cfg Config, client model.Client) *Runtime {
	return &Runtime{name: name, cfg: cfg.WithDefaults(), client: client, clock: realClock{}}
}

// WithClock makes the runtime read time from c (tests).
func (r *Runtime) WithClock(c Clock) *Runtime {
	r.clock = c
	return r
}

// Name is the runtime's name as flows refer to it.
func (r *Runtime) Name() string { return r.name }

// Config is the runtime's configuration.
func (r *Runtime) Config() Config { return r.cfg }

// Initialize checks the configuration that this host must provide (the
// key's variable) without calling the endpoint; a success is cached.
func (r *Runtime) Initialize(ctx context.Context) (*adapter.Info, error) {
	r.mu.Lock()
	info := r.info
	r.mu.Unlock()
	if info != nil {
		return info, nil
	}
	if r.keyMissing {
		return nil, fmt.Errorf("%w: %s is not set in this worker's environment", ErrKeyMissing, r.cfg.APIKeyEnv)
	}
	info = &adapter.Info{Adapter: "native", Binary: r.describe(), Version: r.cfg.Model}
	r.mu.Lock()
	r.info = info
	r.mu.Unlock()
	return info, nil
}

func (r *Runtime) describe() string { return r.cfg.Provider + " " + r.cfg.BaseURL }

// Check is the health check: the configuration, then one call that costs
// no tokens (the model's entry in the endpoint's model list). An endpoint
// that does not answer, or does not know the model, is unhealthy. A key
// the endpoint refuses is not: the runtime stays healthy, with the refusal
// in its Version, so that attempts run and fail AUTH_FAILED — which moves
// a task to its fallback runtime — instead of waiting for a worker that
// will never take them.
func (r *Runtime) Check(ctx context.Context) (*adapter.Info, error) {
	r.mu.Lock()
	r.info = nil
	r.mu.Unlock()
	if r.keyMissing {
		return nil, fmt.Errorf("%w: %s is not set in this worker's environment", ErrKeyMissing, r.cfg.APIKeyEnv)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := r.client.Check(cctx)
	info := &adapter.Info{Adapter: "native", Binary: r.describe(), Version: r.cfg.Model}
	var me *model.Error
	switch {
	case err == nil:
		if ep.Detail != "" {
			info.Version = ep.Model + " (" + ep.Detail + ")"
		} else {
			info.Version = ep.Model
		}
	case errors.As(err, &me) && me.Kind == model.KindAuth:
		info.Version = fmt.Sprintf("%s: key refused (HTTP %d): attempts fail AUTH_FAILED", r.cfg.Model, me.Status)
	default:
		return nil, fmt.Errorf("native: %s at %s: %w", r.cfg.Provider, r.cfg.BaseURL, err)
	}
	r.mu.Lock()
	r.info = info
	r.mu.Unlock()
	return info, nil
}

// Capabilities are what the runtime supports, as adapter.Capabilities
// names them: any model of the provider, headless by construction, and no
// prompt files (the prompt is the first message).
func (r *Runtime) Capabilities() adapter.Capabilities {
	return adapter.Capabilities{SupportsModel: true, SupportsNonInteractive: true, AvailableModels: []string{r.cfg.Model}}
}

// Evaluation is what the runtime_capabilities_evaluated event records
// (event.RuntimeCapabilitiesEvaluatedData has the same fields).
type Evaluation struct {
	Capabilities     adapter.Capabilities
	Provider         string
	Model            string
	BaseURL          string
	Tools            []string
	ScopeEnforcement string // "prevented": the file tools check the scope before a change
	Budget           Budget
}

// Evaluate returns the runtime's capabilities for an attempt that asks for
// model (empty: the configured one).
func (r *Runtime) Evaluate(modelName string) Evaluation {
	if modelName == "" {
		modelName = r.cfg.Model
	}
	return Evaluation{
		Capabilities: r.Capabilities(), Provider: r.cfg.Provider, Model: modelName, BaseURL: r.cfg.BaseURL,
		Tools: tools.Names(), ScopeEnforcement: "prevented", Budget: r.cfg.Budget,
	}
}

// Argv stands for a native run in runtime_started, where a CLI's argv
// goes: what is running, against which endpoint and model (modelName
// empty: the configured one). There is no process: the pid is 0.
func (r *Runtime) Argv(modelName string) []string {
	if modelName == "" {
		modelName = r.cfg.Model
	}
	return []string{"native", r.cfg.Provider, r.cfg.BaseURL, modelName}
}

// baseEnv is what shell commands may see of the worker's environment: the
// same allowlist as the command adapter's (internal/adapter/command.go).
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SHELL"}

// commandEnv builds the shell commands' whole environment, each name once:
// the worker's allowlisted variables, the runtime's passthrough and fixed
// ones, Drover's, then TMPDIR. The API key's variable is never in it.
func (r *Runtime) commandEnv(extra []string, tmp string) []string {
	var env []string
	index := map[string]int{}
	set := func(kv string) {
		name, _, _ := cutEnv(kv)
		if name == r.cfg.APIKeyEnv && name != "" {
			return
		}
		if i, ok := index[name]; ok {
			env[i] = kv
			return
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	for _, name := range slices.Concat(baseEnv, r.cfg.EnvPassthrough) {
		if v, ok := os.LookupEnv(name); ok {
			set(name + "=" + v)
		}
	}
	for _, kv := range slices.Concat(r.cfg.Env, extra) {
		set(kv)
	}
	if tmp != "" {
		set("TMPDIR=" + tmp)
	}
	return env
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}
