package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// mockModel is a loopback stand-in for the model APIs the real claude,
// codex, opencode, kilo and pi CLIs speak, scripted like the recordings in
// testdata/transcripts/{claude,codex}/*/mock-requests.jsonl (cited below as
// FILE:LINE): the first model request of a conversation is answered with a
// tool call that writes hello.txt containing "hi", the next one (which carries
// the tool's result) with a final text. It is stateless: which answer to give
// is read from the request, so retries and concurrent CLIs need no
// bookkeeping. With rateLimit set, every model request gets HTTP 429.
//
//   - Anthropic Messages, streaming SSE: POST /v1/messages (claude adds
//     ?beta=true), plus claude's connectivity probe HEAD / → 404.
//   - OpenAI Responses, streaming SSE: POST /v1/responses (codex with a custom
//     model provider whose base_url is URL/v1).
//   - OpenAI Chat Completions, streaming SSE: POST /v1/chat/completions
//     (opencode, kilo and pi with a provider whose base URL is URL/v1),
//     answered with a final text only.
type mockModel struct {
	srv       *httptest.Server
	rateLimit atomic.Bool

	mu  sync.Mutex
	log []string // one line per request: "METHOD PATH → STATUS what"
}

func newMockModel(t *testing.T) *mockModel {
	m := &mockModel{}
	m.srv = httptest.NewServer(m) // listens on 127.0.0.1
	t.Cleanup(m.srv.Close)
	return m
}

func (m *mockModel) URL() string { return m.srv.URL }

// requests returns the request log so far.
func (m *mockModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

func (m *mockModel) record(r *http.Request, status int, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, fmt.Sprintf("%s %s → %d %s", r.Method, r.URL.Path, status, what))
}

func (m *mockModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		m.anthropic(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		m.responses(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		m.chat(w, r)
	default:
		// claude probes HEAD / first and moves on after a 404
		// (claude/success/mock-requests.jsonl:1).
		m.record(r, http.StatusNotFound, "no route")
		mockJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"type": "not_found_error", "message": "mock: no route for " + r.Method + " " + r.URL.Path}})
	}
}

// --- Anthropic Messages --------------------------------------------------

// mockCwdRe finds the working directory in claude's system prompt ("# Environment
// ... - Primary working directory: /abs/path", claude/success/mock-requests.jsonl:2);
// its Write tool wants an absolute file_path.
var mockCwdRe = regexp.MustCompile(`Primary working directory: (\S+)`)

func (m *mockModel) anthropic(w http.ResponseWriter, r *http.Request, body []byte) {
	if m.rateLimit.Load() {
		// claude/fail-429/mock-requests.jsonl:2-12.
		m.record(r, http.StatusTooManyRequests, "rate limited")
		w.Header().Set("Retry-After", "1")
		mockJSON(w, http.StatusTooManyRequests, map[string]any{"type": "error", "request_id": "req_mock",
			"error": map[string]any{"type": "rate_limit_error", "message": "Number of requests has exceeded your per-minute rate limit (mock)"}})
		return
	}
	var req struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"` // a string or a list of text blocks
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"` // a string or a list of blocks
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		m.record(r, http.StatusBadRequest, "bad request")
		mockJSON(w, http.StatusBadRequest, map[string]any{"type": "error",
			"error": map[string]any{"type": "invalid_request_error", "message": fmt.Sprint("mock: ", err)}})
		return
	}
	last := req.Messages[len(req.Messages)-1]
	start := anthropicStart(req.Model, len(body)/4)
	if mockHasBlock(last.Content, "tool_result") {
		// The second turn: the Write ran; end with a text
		// (claude/success/mock-requests.jsonl:3).
		m.record(r, http.StatusOK, "final text")
		mockSSE(w, append(append([]mockEvent{start}, anthropicText(0, "Done. Created hello.txt.")...),
			anthropicStop("end_turn")...)...)
		return
	}
	// The first turn: a short text, then tool_use Write {file_path, content}
	// with the input streamed as input_json_delta
	// (claude/success/mock-requests.jsonl:2).
	m.record(r, http.StatusOK, "tool_use Write")
	cwd := "."
	if mm := mockCwdRe.FindStringSubmatch(mockBlockText(req.System)); mm != nil {
		cwd = mm[1]
	}
	input, _ := json.Marshal(map[string]string{"file_path": cwd + "/hello.txt", "content": "hi"})
	events := []mockEvent{start}
	events = append(events, anthropicText(0, "I'll create the file.")...)
	events = append(events,
		mockEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": 1,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_mock000001", "name": "Write", "input": map[string]any{}}}},
		mockEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 1,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}}},
		mockEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 1}})
	mockSSE(w, append(events, anthropicStop("tool_use")...)...)
}

func anthropicStart(model string, inputTokens int) mockEvent {
	return mockEvent{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}}
}

func anthropicText(index int, text string) []mockEvent {
	return []mockEvent{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
			"delta": map[string]any{"type": "text_delta", "text": text}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": index}},
	}
}

func anthropicStop(reason string) []mockEvent {
	return []mockEvent{
		{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": reason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 12}}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}
}

// mockHasBlock reports whether content (a string or a list of blocks) has a block
// of that type.
func mockHasBlock(content json.RawMessage, typ string) bool {
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}

// mockBlockText joins the text of content given as a string or a list of blocks.
func mockBlockText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
		b.WriteString("\n")
	}
	return b.String()
}

// --- OpenAI Responses ----------------------------------------------------

func (m *mockModel) responses(w http.ResponseWriter, r *http.Request, body []byte) {
	if m.rateLimit.Load() {
		// codex/fail-429/mock-requests.jsonl:1-6.
		m.record(r, http.StatusTooManyRequests, "rate limited")
		w.Header().Set("Retry-After", "1")
		mockJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"code": "rate_limit_exceeded", "type": "requests", "param": nil,
			"message": "Rate limit reached for requests (mock). Please try again in 1s."}})
		return
	}
	var req struct {
		Model string `json:"model"`
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		m.record(r, http.StatusBadRequest, "bad request")
		mockJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "message": "mock: " + err.Error()}})
		return
	}
	called := false
	for _, it := range req.Input {
		called = called || it.Type == "function_call_output"
	}
	var item map[string]any
	var parts []mockEvent // events between output_item.added and .done
	if called {
		// The second turn: the command ran; end with an assistant message
		// (codex/success/mock-requests.jsonl:2).
		m.record(r, http.StatusOK, "final message")
		const text = "Done. Created hello.txt."
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		item = map[string]any{"type": "message", "id": "msg_mock", "role": "assistant", "status": "completed",
			"content": []any{part}}
		at := map[string]any{"item_id": "msg_mock", "output_index": 0, "content_index": 0}
		parts = []mockEvent{
			{"response.content_part.added", mockWith(at, "type", "response.content_part.added",
				"part", map[string]any{"type": "output_text", "text": "", "annotations": []any{}})},
			{"response.output_text.delta", mockWith(at, "type", "response.output_text.delta", "delta", text)},
			{"response.output_text.done", mockWith(at, "type", "response.output_text.done", "text", text)},
			{"response.content_part.done", mockWith(at, "type", "response.content_part.done", "part", part)},
		}
	} else {
		// The first turn: a function call to codex's shell tool; for an
		// unknown model codex offers exec_command, not apply_patch
		// (codex/success/mock-requests.jsonl:1). It runs in the cwd.
		m.record(r, http.StatusOK, "function_call exec_command")
		args, _ := json.Marshal(map[string]string{"cmd": "printf hi > hello.txt"})
		item = map[string]any{"type": "function_call", "id": "fc_mock", "call_id": "call_mock000001",
			"name": "exec_command", "arguments": string(args), "status": "completed"}
	}
	resp := func(status string, output []any, usage any) map[string]any {
		r := map[string]any{"id": "resp_mock", "object": "response", "created_at": 1795319753,
			"model": req.Model, "status": status, "output": output}
		if usage != nil {
			r["usage"] = usage
		}
		return r
	}
	usage := map[string]any{"input_tokens": len(body) / 4, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 12, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": len(body)/4 + 12}
	events := []mockEvent{
		{"response.created", map[string]any{"type": "response.created", "response": resp("in_progress", []any{}, nil)}},
		{"response.in_progress", map[string]any{"type": "response.in_progress", "response": resp("in_progress", []any{}, nil)}},
		{"response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item}},
	}
	events = append(events, parts...)
	events = append(events,
		mockEvent{"response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}},
		mockEvent{"response.completed", map[string]any{"type": "response.completed", "response": resp("completed", []any{item}, usage)}})
	for i := range events { // every Responses event carries its sequence_number
		events[i].data["sequence_number"] = i
	}
	mockSSE(w, events...)
}

// mockWith returns a copy of base with the key/value pairs added.
func mockWith(base map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// --- wire helpers --------------------------------------------------------

type mockEvent struct {
	name string
	data map[string]any
}

// mockSSE writes a complete event stream: "event: NAME\ndata: JSON\n\n" each.
func mockSSE(w http.ResponseWriter, events ...mockEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		data, _ := json.Marshal(e.data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, data)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func mockJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// chat answers a Chat Completions request with a final text, as the
// recorded server did (pi/success/mock-requests.jsonl:2): the assistant's
// role, the text, the finish, then the usage with no choices, and [DONE].
func (m *mockModel) chat(w http.ResponseWriter, r *http.Request) {
	m.record(r, http.StatusOK, "final text")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	chunk := func(choices []any, usage map[string]any) map[string]any {
		c := map[string]any{"id": "chatcmpl_mock", "object": "chat.completion.chunk", "created": 1795319776, "model": "mock-model", "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
	}
	for _, c := range []map[string]any{
		chunk(choice(map[string]any{"role": "assistant", "content": ""}, nil), nil),
		chunk(choice(map[string]any{"content": "Done."}, nil), nil),
		chunk(choice(map[string]any{}, "stop"), nil),
		chunk([]any{}, map[string]any{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}),
	} {
		data, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
