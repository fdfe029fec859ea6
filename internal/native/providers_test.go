package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// provider is one of the three wire protocols, with its test server.
type provider struct {
	name string
	new  func(t testing.TB, key string, replies ...nativetest.Reply) *nativetest.Server
}

var providers = []provider{
	{"anthropic", nativetest.NewAnthropic},
	{"openai-responses", nativetest.NewResponses},
	{"openai-chat", nativetest.NewChat},
}

func clientFor(t testing.TB, p provider, srv *nativetest.Server, key string) model.Client {
	t.Helper()
	c, err := native.NewClient(native.Config{Provider: p.name, BaseURL: srv.BaseURL(), Model: srv.ModelID}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func twoTools() []model.ToolDef {
	return []model.ToolDef{
		{Name: "read_file", Description: "Read a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "bash", Description: "Run a command.", Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
	}
}

// A conversation in progress: a prompt, an answer with two calls, their
// results. What each API is sent for it is checked below.
func conversation() []model.Message {
	return []model.Message{
		{Role: model.User, Text: "Fix the bug."},
		{Role: model.Assistant, Text: "Let me look.", ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "read_file", Input: json.RawMessage(`{"path":"main.go"}`)},
			{ID: "call_b", Name: "bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
		}},
		{Role: model.User, ToolResults: []model.ToolResult{
			{CallID: "call_a", Name: "read_file", Content: "package main"},
			{CallID: "call_b", Name: "bash", Content: "FAIL", IsError: true},
		}},
	}
}

func TestProvidersStreamAnswers(t *testing.T) {
	// The worker's own provider variables must not leak into a client.
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_API_KEY", "worker-key")
	t.Setenv("OPENAI_API_KEY", "worker-key")
	t.Setenv("OPENAI_ORG_ID", "org-leak")
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			calls := []model.ToolCall{
				{ID: "toolu_1", Name: "read_file", Input: json.RawMessage(`{"path":"src/é.go"}`)},
				{ID: "toolu_2", Name: "bash", Input: json.RawMessage(`{"command":"go vet ./... && echo \"ok\""}`)},
			}
			srv := p.new(t, "sk-test",
				nativetest.Reply{Text: "I will read it — then test.", ToolCalls: calls, Usage: model.Usage{InputTokens: 1200, OutputTokens: 85, CacheReadTokens: 300}},
				nativetest.Reply{Text: "Done: fixed.", Usage: model.Usage{InputTokens: 40, OutputTokens: 7}},
				nativetest.Reply{Text: "partial", Stop: model.StopMaxTokens, Usage: model.Usage{InputTokens: 1, OutputTokens: 16}},
			)
			c := clientFor(t, p, srv, "sk-test")
			req := &model.Request{System: "Be careful.", Messages: conversation(), Tools: twoTools(), MaxOutputTokens: 999}
			r, err := c.Turn(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := &model.Response{Text: "I will read it — then test.", ToolCalls: calls, StopReason: model.StopToolUse,
				Usage: model.Usage{InputTokens: 1200, OutputTokens: 85, CacheReadTokens: 300}, Model: "test-model"}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("turn 1:\n got %+v\nwant %+v", r, want)
			}
			r, err = c.Turn(t.Context(), &model.Request{Messages: []model.Message{{Role: model.User, Text: "x"}}, MaxOutputTokens: 10})
			if err != nil || r.Text != "Done: fixed." || r.StopReason != model.StopEndTurn || len(r.ToolCalls) != 0 || r.Usage.OutputTokens != 7 {
				t.Errorf("turn 2: %+v, %v", r, err)
			}
			r, err = c.Turn(t.Context(), &model.Request{Messages: []model.Message{{Role: model.User, Text: "x"}}, MaxOutputTokens: 16})
			if err != nil || r.StopReason != model.StopMaxTokens || r.Text != "partial" {
				t.Errorf("turn 3: %+v, %v", r, err)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			checkWire(t, p.name, reqs[0])
		})
	}
}

// checkWire checks what each API was sent for conversation().
func checkWire(t *testing.T, provider string, rec nativetest.Recorded) {
	t.Helper()
	body := rec.Body
	if body["stream"] != true {
		t.Errorf("not streamed: %s", rec.Raw)
	}
	if rec.Header.Get("OpenAI-Organization") != "" || strings.Contains(string(rec.Raw), "org-leak") {
		t.Errorf("the worker's OPENAI_ORG_ID leaked into the request")
	}
	raw := string(rec.Raw)
	switch provider {
	case "anthropic":
		if rec.Header.Get("Authorization") != "Bearer sk-test" || body["max_tokens"] != 999.0 || body["model"] != "test-model" {
			t.Errorf("anthropic header/body: %v %s", rec.Header, raw)
		}
		msgs := body["messages"].([]any)
		if len(msgs) != 3 {
			t.Fatalf("anthropic messages: %s", raw)
		}
		asst := msgs[1].(map[string]any)["content"].([]any)
		if asst[1].(map[string]any)["type"] != "tool_use" || asst[1].(map[string]any)["id"] != "call_a" ||
			asst[1].(map[string]any)["input"].(map[string]any)["path"] != "main.go" {
			t.Errorf("anthropic tool_use: %v", asst)
		}
		res := msgs[2].(map[string]any)["content"].([]any)
		r1 := res[1].(map[string]any)
		if r1["type"] != "tool_result" || r1["tool_use_id"] != "call_b" || r1["is_error"] != true || r1["cache_control"] == nil {
			t.Errorf("anthropic tool_result (the last block marked for caching): %v", res)
		}
		sys := body["system"].([]any)[0].(map[string]any)
		if sys["text"] != "Be careful." || sys["cache_control"] == nil {
			t.Errorf("anthropic system: %v", sys)
		}
		tools := body["tools"].([]any)
		if tools[0].(map[string]any)["name"] != "read_file" || tools[0].(map[string]any)["input_schema"].(map[string]any)["required"].([]any)[0] != "path" {
			t.Errorf("anthropic tools: %v", tools)
		}
	case "openai-responses":
		if rec.Header.Get("Authorization") != "Bearer sk-test" || body["store"] != false || body["instructions"] != "Be careful." || body["max_output_tokens"] != 999.0 {
			t.Errorf("responses header/body: %s", raw)
		}
		in := body["input"].([]any)
		types := []string{}
		for _, it := range in {
			m := it.(map[string]any)
			ty, _ := m["type"].(string)
			if ty == "" {
				ty = "message:" + m["role"].(string)
			}
			types = append(types, ty)
		}
		if strings.Join(types, ",") != "message:user,message:assistant,function_call,function_call,function_call_output,function_call_output" {
			t.Errorf("responses input items: %v\n%s", types, raw)
		}
		fc := in[2].(map[string]any)
		out := in[5].(map[string]any)
		if fc["call_id"] != "call_a" || fc["name"] != "read_file" || fc["arguments"] != `{"path":"main.go"}` || out["call_id"] != "call_b" || out["output"] != "FAIL" {
			t.Errorf("responses calls: %v / %v", fc, out)
		}
		tool := body["tools"].([]any)[1].(map[string]any)
		if tool["type"] != "function" || tool["name"] != "bash" || tool["parameters"] == nil {
			t.Errorf("responses tool: %v", tool)
		}
	case "openai-chat":
		if rec.Header.Get("Authorization") != "Bearer sk-test" || body["max_tokens"] != 999.0 || body["stream_options"].(map[string]any)["include_usage"] != true {
			t.Errorf("chat header/body: %s", raw)
		}
		msgs := body["messages"].([]any)
		roles := []string{}
		for _, m := range msgs {
			roles = append(roles, m.(map[string]any)["role"].(string))
		}
		if strings.Join(roles, ",") != "system,user,assistant,tool,tool" {
			t.Errorf("chat roles: %v", roles)
		}
		tc := msgs[2].(map[string]any)["tool_calls"].([]any)[1].(map[string]any)
		if tc["id"] != "call_b" || tc["function"].(map[string]any)["arguments"] != `{"command":"go test ./..."}` {
			t.Errorf("chat tool call: %v", tc)
		}
		if m := msgs[4].(map[string]any); m["tool_call_id"] != "call_b" || m["content"] != "FAIL" {
			t.Errorf("chat tool message: %v", m)
		}
		fn := body["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
		if fn["name"] != "read_file" || fn["parameters"] == nil {
			t.Errorf("chat tool: %v", fn)
		}
	}
}

func TestProvidersClassifyFailures(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name   string
		reply  nativetest.Reply
		kind   model.Kind
		status int
		wait   time.Duration
	}{
		{"429 with retry-after", nativetest.Reply{Status: 429, Header: hdr("Retry-After", "17"), ErrorType: "rate_limit_error"}, model.KindRateLimited, 429, 17 * time.Second},
		{"429 with retry-after-ms", nativetest.Reply{Status: 429, Header: hdr("retry-after-ms", "2500")}, model.KindRateLimited, 429, 2500 * time.Millisecond},
		{"401", nativetest.Reply{Status: 401, ErrorType: "authentication_error"}, model.KindAuth, 401, 0},
		{"403", nativetest.Reply{Status: 403, ErrorType: "permission_error"}, model.KindAuth, 403, 0},
		{"500", nativetest.Reply{Status: 500}, model.KindTransient, 500, 0},
		{"503", nativetest.Reply{Status: 503}, model.KindTransient, 503, 0},
		{"529 overloaded", nativetest.Reply{Status: 529, ErrorType: "overloaded_error", Header: hdr("Retry-After", "3")}, model.KindTransient, 529, 3 * time.Second},
		{"400", nativetest.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "prompt is too long"}, model.KindRequest, 400, 0},
		{"404 model", nativetest.Reply{Status: 404, ErrorType: "not_found_error"}, model.KindRequest, 404, 0},
		{"stream error", nativetest.Reply{Text: "half an answ", StreamError: true}, model.KindTransient, 0, 0},
		{"cut connection", nativetest.Reply{Text: "x", Cut: true}, model.KindTransient, 0, 0},
	}
	for _, p := range providers {
		for _, c := range cases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				srv := p.new(t, "", c.reply)
				_, err := clientFor(t, p, srv, "").Turn(t.Context(), &model.Request{Messages: []model.Message{{Role: model.User, Text: "hi"}}, MaxOutputTokens: 5})
				var me *model.Error
				if !errors.As(err, &me) {
					t.Fatalf("error %v (%T) is not a *model.Error", err, err)
				}
				if me.Kind != c.kind || me.Status != c.status || me.RetryAfter != c.wait || me.Provider != p.name {
					t.Errorf("got kind %s status %d wait %v provider %s (%v); want %s %d %v", me.Kind, me.Status, me.RetryAfter, me.Provider, me, c.kind, c.status, c.wait)
				}
				if n := len(srv.Requests()); n != 1 {
					t.Errorf("%d requests: the SDK retried on its own", n)
				}
			})
		}
	}
}

// Provider-specific failure shapes inside a stream.
func TestProvidersStreamErrorKinds(t *testing.T) {
	for _, c := range []struct {
		p    provider
		typ  string
		kind model.Kind
	}{
		{providers[0], "rate_limit_error", model.KindRateLimited},
		{providers[0], "overloaded_error", model.KindTransient},
		{providers[0], "authentication_error", model.KindAuth},
		{providers[1], "rate_limit_exceeded", model.KindRateLimited},
		{providers[1], "server_error", model.KindTransient},
		{providers[2], "429", model.KindRateLimited},
		{providers[2], "502", model.KindTransient},
		{providers[2], "rate_limit_exceeded", model.KindRateLimited},
	} {
		srv := c.p.new(t, "", nativetest.Reply{StreamError: true, ErrorType: c.typ, ErrorMessage: "boom"})
		_, err := clientFor(t, c.p, srv, "").Turn(t.Context(), &model.Request{Messages: []model.Message{{Role: model.User, Text: "hi"}}, MaxOutputTokens: 5})
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != c.kind || !strings.Contains(me.Message, "boom") {
			t.Errorf("%s %s: %v, want %s", c.p.name, c.typ, err, c.kind)
		}
	}
}

func TestProvidersCancelMidStream(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.new(t, "", nativetest.Reply{Hang: true})
			c := clientFor(t, p, srv, "")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := c.Turn(ctx, &model.Request{Messages: []model.Message{{Role: model.User, Text: "hi"}}, MaxOutputTokens: 5})
				done <- err
			}()
			<-srv.Hung()
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled turn: %v", err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("cancel took %s", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the turn did not stop when cancelled")
			}
		})
	}
}

func TestProvidersCheck(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			srv := p.new(t, "sk-right")
			ep, err := clientFor(t, p, srv, "sk-right").Check(t.Context())
			if err != nil || ep.Model != "test-model" || ep.Provider != p.name {
				t.Fatalf("check: %+v, %v", ep, err)
			}
			_, err = clientFor(t, p, srv, "sk-wrong").Check(t.Context())
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.KindAuth || me.Status != 401 {
				t.Errorf("wrong key: %v", err)
			}
			c := clientFor(t, p, srv, "sk-right")
			srv.ModelID = "another-model"
			ep, err = c.Check(t.Context())
			if p.name == "openai-chat" {
				// Listing is all every compatible server offers: a model
				// missing from the list is reported, not failed.
				if err != nil || ep.Detail != "not in the endpoint's model list" {
					t.Errorf("unlisted model: %+v, %v", ep, err)
				}
			} else if !errors.As(err, &me) || me.Kind != model.KindRequest || me.Status != 404 {
				t.Errorf("unknown model: %v", err)
			}
			for _, r := range srv.Requests() {
				if r.Method != http.MethodGet {
					t.Errorf("the health check sent %s %s: it must spend no tokens", r.Method, r.Path)
				}
			}
		})
	}
}

func TestProvidersUnreachable(t *testing.T) {
	for _, p := range providers {
		c, _ := native.NewClient(native.Config{Provider: p.name, BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, "k", nil)
		_, err := c.Turn(t.Context(), &model.Request{Messages: []model.Message{{Role: model.User, Text: "hi"}}, MaxOutputTokens: 5})
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.KindTransient {
			t.Errorf("%s: connection refused is %v, want transient", p.name, err)
		}
		if _, err := c.Check(t.Context()); err == nil {
			t.Errorf("%s: check of an unreachable endpoint passed", p.name)
		}
	}
}
