package native_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

func runtimeConfig(provider, baseURL, keyEnv string) config.Runtime {
	retries := 1
	return config.Runtime{Adapter: "native", Model: "test-model", Timeout: time.Hour, Grace: time.Second,
		NativeRuntime: config.NativeRuntime{Provider: provider, BaseURL: baseURL, APIKeyEnv: keyEnv, MaxTokens: 4096, MaxRetries: &retries,
			Budget: config.NativeBudget{Turns: 10, Tokens: 1e6}}}
}

// The whole loop over real HTTP, against each wire protocol's test
// server: the same scripted task gives the same worktree.
func TestRunOverEachProvider(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			srv := p.new(t, "sk-live",
				nativetest.Reply{Text: "Looking.", ToolCalls: []model.ToolCall{nativetest.Call("t1", "read_file", map[string]any{"path": "main.go"})}, Usage: usage(500, 40)},
				nativetest.Reply{Status: 529, ErrorType: "overloaded_error"},
				nativetest.Reply{ToolCalls: []model.ToolCall{nativetest.Call("t2", "edit_file", map[string]any{"path": "main.go", "old_string": "helo", "new_string": "hello"})}, Usage: usage(600, 30)},
				nativetest.Reply{Text: "Fixed.", Usage: usage(700, 5)},
			)
			t.Setenv("TEST_KEY", "sk-live")
			rt, err := native.New("n", runtimeConfig(p.name, srv.BaseURL(), "TEST_KEY"))
			if err != nil {
				t.Fatal(err)
			}
			rt.WithClock(e.clock) // the retry wait passes at once
			res, err := rt.Run(t.Context(), e.input("Fix the typo."), e.out)
			if err != nil || res.Outcome != native.Completed || res.FinalText != "Fixed." || res.Turns != 3 || res.Usage != usage(1800, 75) {
				t.Fatalf("%+v %v %v", res, res.Error, err)
			}
			if !strings.Contains(e.read(t, "main.go"), "hello") || srv.Left() != 0 || len(srv.Requests()) != 4 {
				t.Errorf("main.go %q, %d replies left, %d requests", e.read(t, "main.go"), srv.Left(), len(srv.Requests()))
			}
			if got := e.clock.Sleeps(); len(got) != 1 {
				t.Errorf("retry waits %v", got)
			}
		})
	}
}

// A refused key reaches the attempt as AUTH_FAILED, at once; the health
// check stays healthy and says so, so that fallback applies.
func TestRefusedKey(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			srv := p.new(t, "sk-right", nativetest.Reply{Text: "never"})
			t.Setenv("TEST_KEY", "sk-wrong")
			rt, _ := native.New("n", runtimeConfig(p.name, srv.BaseURL(), "TEST_KEY"))
			info, err := rt.Check(t.Context())
			if err != nil || !strings.Contains(info.Version, "key refused (HTTP 401)") || info.Adapter != "native" {
				t.Fatalf("health: %+v %v", info, err)
			}
			res, _ := rt.Run(t.Context(), e.input("go"), e.out)
			if res.Error == nil || res.Error.Class != drovertype.ClassAuthFailed || res.Error.Status != 401 || len(srv.Requests()) != 2 {
				t.Fatalf("run: %+v, %d requests", res.Error, len(srv.Requests()))
			}
		})
	}
}

func TestHealth(t *testing.T) {
	srv := nativetest.NewAnthropic(t, "k")
	t.Setenv("TEST_KEY", "k")
	rt, _ := native.New("n", runtimeConfig("anthropic", srv.BaseURL(), "TEST_KEY"))
	info, err := rt.Initialize(t.Context())
	if err != nil || info.Adapter != "native" || info.Binary != "anthropic "+srv.URL || len(srv.Requests()) != 0 {
		t.Fatalf("initialize (no call): %+v %v", info, err)
	}
	info, err = rt.Check(t.Context())
	if err != nil || info.Version != "test-model (Test Model)" {
		t.Fatalf("check: %+v %v", info, err)
	}
	// A model the endpoint does not know is unhealthy.
	cfg := runtimeConfig("anthropic", srv.BaseURL(), "TEST_KEY")
	cfg.Model = "no-such-model"
	rt, _ = native.New("n", cfg)
	if _, err := rt.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "not_found_error") {
		t.Errorf("unknown model: %v", err)
	}
	// So is an endpoint that does not answer.
	rt, _ = native.New("n", runtimeConfig("anthropic", "http://127.0.0.1:1", "TEST_KEY"))
	if _, err := rt.Check(t.Context()); err == nil {
		t.Error("unreachable endpoint is healthy")
	}
	// A key this host lacks: unhealthy here, without a call.
	t.Setenv("TEST_KEY", "")
	before := len(srv.Requests())
	rt, _ = native.New("n", runtimeConfig("anthropic", srv.BaseURL(), "TEST_KEY"))
	if _, err := rt.Initialize(t.Context()); !errors.Is(err, native.ErrKeyMissing) {
		t.Errorf("initialize without the key: %v", err)
	}
	if _, err := rt.Check(t.Context()); !errors.Is(err, native.ErrKeyMissing) || len(srv.Requests()) != before {
		t.Errorf("check without the key: %v", err)
	}
}

func TestConfigFromAndCapabilities(t *testing.T) {
	retries := 0
	rt := config.Runtime{Adapter: "native", Model: "gpt-x", Timeout: 7 * time.Minute, Grace: 3 * time.Second,
		Env: []string{"A=1"}, EnvPassthrough: []string{"GOPATH"}, Limits: config.Limits{CPUSeconds: 9},
		NativeRuntime: config.NativeRuntime{Provider: "openai-responses", BaseURL: "https://x/v1", APIKeyEnv: "K", MaxTokens: 100, MaxRetries: &retries,
			CommandTimeout: time.Minute, Budget: config.NativeBudget{Turns: 5, Tokens: 6, InputTokens: 7, OutputTokens: 8, Time: time.Second},
			Price: config.NativePrice{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 3}}}
	c := native.ConfigFrom(rt)
	want := native.Config{Provider: "openai-responses", BaseURL: "https://x/v1", APIKeyEnv: "K", Model: "gpt-x", MaxTokens: 100, MaxRetries: 0,
		Budget: native.Budget{Turns: 5, Tokens: 6, InputTokens: 7, OutputTokens: 8, Time: time.Second}, Price: native.Price{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 3},
		Timeout: 7 * time.Minute, Grace: 3 * time.Second, CommandTimeout: time.Minute, Env: []string{"A=1"}, EnvPassthrough: []string{"GOPATH"},
		RetryBackoff: time.Second, RetryMaxWait: 30 * time.Second}
	want.Limits.CPUSeconds = 9
	if got, _ := json.Marshal(c); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("ConfigFrom:\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
	n := native.NewRuntime("gpt", c, nativetest.NewMock())
	caps := n.Capabilities()
	if !caps.SupportsModel || !caps.SupportsNonInteractive || caps.SupportsPromptFileInclusion || !slices.Equal(caps.AvailableModels, []string{"gpt-x"}) {
		t.Errorf("capabilities: %+v", caps)
	}
	ev := n.Evaluate("gpt-y")
	if ev.Model != "gpt-y" || ev.ScopeEnforcement != "prevented" || len(ev.Tools) != 7 || ev.Budget.Turns != 5 || ev.Provider != "openai-responses" {
		t.Errorf("evaluation: %+v", ev)
	}
	if got := n.Argv(""); !slices.Equal(got, []string{"native", "openai-responses", "https://x/v1", "gpt-x"}) {
		t.Errorf("argv: %v", got)
	}
	if _, err := native.NewClient(native.Config{Provider: "gemini"}, "", nil); err == nil {
		t.Error("an unknown provider has a client")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// Commands see the allowlist, the runtime's env, Drover's variables and
// TMPDIR — never the key, even when passed through by mistake.
func TestCommandEnvironment(t *testing.T) {
	e := newEnv(t)
	t.Setenv("MY_KEY", "sk-secret")
	t.Setenv("GOPATH", "/go")
	t.Setenv("NOT_ALLOWED", "x")
	mock := nativetest.NewMock(nativetest.Calls(usage(1, 1), nativetest.Call("c", "bash", map[string]any{"command": "env | sort"})), nativetest.Text("ok", usage(1, 1)))
	rt := e.runtime(native.Config{APIKeyEnv: "MY_KEY", EnvPassthrough: []string{"GOPATH", "MY_KEY"}, Env: []string{"FIXED=1", "MY_KEY=leak"}}, mock)
	in := e.input("go")
	in.Scope = &flow.Scope{}
	if _, err := rt.Run(t.Context(), in, nil); err != nil {
		t.Fatal(err)
	}
	out := mock.Requests()[1].Messages[2].ToolResults[0].Content
	for _, want := range []string{"GOPATH=/go\n", "FIXED=1\n", "DROVER_TASK_ID=t1\n", "TMPDIR=" + e.tmp + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"sk-secret", "MY_KEY", "NOT_ALLOWED"} {
		if strings.Contains(out, bad) {
			t.Errorf("env has %q:\n%s", bad, out)
		}
	}
}

// Production code must not link the test support, and the native
// packages must not import "testing" themselves. (Package adapter's
// conformance suite does, which is outside this tree.)
func TestProductionImportsNoTestSupport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", "github.com/drover-dev/drover/internal/native").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		if strings.HasSuffix(pkg, "/nativetest") {
			t.Errorf("internal/native depends on %s", pkg)
		}
		if strings.Contains(pkg, "/internal/native") && slices.Contains(strings.Fields(imports), "testing") {
			t.Errorf("%s imports testing", pkg)
		}
	}
}
