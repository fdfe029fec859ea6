package main

// @call-model: in persona mode, the codex and pi personas make one request
// to the model endpoint their own configuration names, read where the
// real CLI reads it, so that a test can tell whether the sandbox lets
// them through (docs/demo-agent.md#call-model).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// modelCall is what @call-model needs of the persona's command line.
type modelCall struct {
	cli             string // codex or pi
	provider, model string // pi's --provider and --model
}

// callModelCLIs are the personas @call-model plays.
var callModelCLIs = map[string]bool{"codex": true, "pi": true}

// endpoint is a model endpoint and the key to send it.
type endpoint struct {
	url, key string
	path     string // the API's path below the base URL
	body     string
}

// endpoint reads the CLI's configuration as the CLI does.
func (m *modelCall) endpoint() (*endpoint, error) {
	home, _ := os.UserHomeDir()
	switch m.cli {
	case "codex":
		dir := os.Getenv("CODEX_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".codex")
		}
		return codexEndpoint(filepath.Join(dir, "config.toml"))
	case "pi":
		dir := os.Getenv("PI_CODING_AGENT_DIR")
		switch {
		case dir == "":
			dir = filepath.Join(home, ".pi", "agent")
		case dir == "~", strings.HasPrefix(dir, "~/"):
			dir = filepath.Join(home, dir[1:])
		}
		return piEndpoint(filepath.Join(dir, "models.json"), m.provider, m.model)
	}
	return nil, fmt.Errorf("the %s persona makes no model requests", m.cli)
}

// codexEndpoint: config.toml's model_provider, its model_providers
// entry's base_url and env_key; the Responses API.
func codexEndpoint(path string) (*endpoint, error) {
	var cfg struct {
		Model          string `toml:"model"`
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL string `toml:"base_url"`
			EnvKey  string `toml:"env_key"`
		} `toml:"model_providers"`
	}
	if _, err := toml.DecodeFile(path, &cfg); err != nil {
		return nil, fmt.Errorf("Error loading config.toml: %w", err)
	}
	p, ok := cfg.ModelProviders[cfg.ModelProvider]
	if !ok || p.BaseURL == "" {
		return nil, fmt.Errorf("%s: model_provider %q has no base_url in model_providers", path, cfg.ModelProvider)
	}
	body, _ := json.Marshal(map[string]any{"model": cfg.Model, "input": "ping", "stream": false})
	return &endpoint{url: p.BaseURL, key: os.Getenv(p.EnvKey), path: "/responses", body: string(body)}, nil
}

// piEndpoint: models.json's provider's baseUrl (the model's own when it
// has one) and apiKey (a variable's name, else the key); Chat Completions.
// Without --provider, the one provider models.json has (pi itself would
// take settings.json's default).
func piEndpoint(path, provider, model string) (*endpoint, error) {
	var cfg struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			APIKey  string `json:"apiKey"`
			Models  []struct {
				ID      string `json:"id"`
				BaseURL string `json:"baseUrl"`
			} `json:"models"`
		} `json:"providers"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("models.json: %w", err)
	}
	if provider == "" && len(cfg.Providers) == 1 {
		for k := range cfg.Providers {
			provider = k
		}
	}
	p, ok := cfg.Providers[provider]
	if !ok {
		return nil, fmt.Errorf("%s: no provider %q (--provider)", path, provider)
	}
	url := p.BaseURL
	for _, m := range p.Models {
		if m.ID == model && m.BaseURL != "" {
			url = m.BaseURL
		}
	}
	key := p.APIKey
	if v, ok := os.LookupEnv(key); ok {
		key = v
	}
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]string{"role": "user", "content": "ping"}}})
	return &endpoint{url: url, key: key, path: "/chat/completions", body: string(body)}, nil
}

// post sends the request; any answer, whatever its status, means the
// endpoint was reached.
func (e *endpoint) post() error {
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(e.url, "/")+e.path, strings.NewReader(e.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// callModel reaches the model, or retries as the real CLI retries a
// connection that fails, printing what it printed when its sandbox
// refused the port (testdata/transcripts/<cli>/sandbox-denied): codex
// "Reconnecting... waiting for network (Connection failed: …)" for ever,
// after 1, 2, 4, then every 8 seconds; pi a failed message and an auto
// retry after 2, 4 and 8 seconds, then it gives up and exits 0.
// DEMO_AGENT_PACE=recorded/N makes the waits N times shorter.
func (a *agent) callModel() error {
	if a.model == nil {
		return errors.New("works only in the codex and pi personas")
	}
	ep, err := a.model.endpoint()
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		if err := ep.post(); err == nil {
			a.did("reached the model at " + ep.url)
			return nil
		}
		var wait time.Duration
		switch a.model.cli {
		case "codex":
			a.out.raw([]byte(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}` + "\n"))
			wait = min(time.Second<<try, 8*time.Second)
		case "pi":
			if try == 3 {
				a.out.raw(piLine(`{"type":"agent_end","messages":[]}`))
				a.out.raw(piLine(`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"Connection error."}`))
				return &exitError{code: exitOK}
			}
			wait = 2 * time.Second << try
			a.out.raw(piLine(fmt.Sprintf(`{"type":"message_end","message":{"role":"assistant","content":[],"api":"openai-completions",`+
				`"provider":%q,"model":%q,"stopReason":"error","errorMessage":"Connection error."}}`, a.model.provider, a.model.model)))
			a.out.raw(piLine(fmt.Sprintf(`{"type":"auto_retry_start","attempt":%d,"maxAttempts":3,"delayMs":%d,"errorMessage":"Connection error."}`,
				try+1, wait.Milliseconds())))
		}
		if a.rec != nil && a.rec.scale > 1 { // DEMO_AGENT_PACE=recorded/N: N times faster
			wait = time.Duration(float64(wait) / a.rec.scale)
		}
		time.Sleep(wait)
	}
}

func piLine(s string) []byte { return append(bytes.Clone([]byte(s)), '\n') }
