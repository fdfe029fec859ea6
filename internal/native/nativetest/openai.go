package nativetest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/native/model"
)

// NewResponses starts a server speaking OpenAI's Responses API: POST
// /v1/responses with stream=true answers with its semantic events
// (response.created, response.output_item.added/done,
// response.output_text.delta, response.function_call_arguments.delta,
// response.completed or response.incomplete). Its base URL is s.URL+"/v1".
func NewResponses(t testing.TB, key string, replies ...Reply) *Server {
	s := newServer(t, "openai-responses", key, serveOpenAI)
	s.Push(replies...)
	return s
}

// NewChat starts a server speaking Chat Completions: POST
// /v1/chat/completions with stream=true answers with data-only
// chat.completion.chunk events ending in [DONE], usage in a last chunk
// without choices. Its base URL is s.URL+"/v1".
func NewChat(t testing.TB, key string, replies ...Reply) *Server {
	s := newServer(t, "openai-chat", key, serveOpenAI)
	s.Push(replies...)
	return s
}

// BaseURL is the server's base URL as its provider's SDK takes it.
func (s *Server) BaseURL() string {
	if s.Provider == "anthropic" {
		return s.URL
	}
	return s.URL + "/v1"
}

func openAIError(w http.ResponseWriter, status int, header http.Header, code, msg string) {
	typ := "server_error"
	switch {
	case status == 429:
		typ = "requests"
	case status < 500:
		typ = "invalid_request_error"
	}
	var c any = code
	if code == "" {
		c = nil
	}
	writeJSON(w, status, header, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

func serveOpenAI(s *Server, w http.ResponseWriter, r *http.Request) {
	if s.Key != "" && bearer(r) != s.Key {
		openAIError(w, 401, nil, "invalid_api_key", "Incorrect API key provided")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		writeJSON(w, 200, nil, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "other-model", "object": "model", "created": 1700000000, "owned_by": "test"},
			map[string]any{"id": s.ModelID, "object": "model", "created": 1700000000, "owned_by": "test"},
		}})
		return
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/models/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
		if id != s.ModelID {
			openAIError(w, 404, nil, "model_not_found", "The model `"+id+"` does not exist")
			return
		}
		writeJSON(w, 200, nil, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "test"})
		return
	case r.Method == http.MethodPost && s.Provider == "openai-responses" && r.URL.Path == "/v1/responses":
	case r.Method == http.MethodPost && s.Provider == "openai-chat" && r.URL.Path == "/v1/chat/completions":
	default:
		openAIError(w, 404, nil, "", "unknown route "+r.Method+" "+r.URL.Path)
		return
	}
	rep, ok := s.next()
	if !ok {
		openAIError(w, 500, nil, "server_error", "the test script has no reply left")
		return
	}
	if rep.Status != 0 {
		openAIError(w, rep.Status, rep.Header, rep.ErrorType, orDefault(rep.ErrorMessage, "scripted failure"))
		return
	}
	if s.Provider == "openai-chat" {
		s.chat(w, r, rep)
	} else {
		s.responses(w, r, rep)
	}
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request, rep Reply) {
	e := startSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		e.event(typ, fields)
	}
	resp := func(status string, output []any) map[string]any {
		m := map[string]any{"id": "resp_test", "object": "response", "created_at": 1700000000, "status": status,
			"model": modelOf(s, rep), "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
			"error": nil, "incomplete_details": nil}
		return m
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{})})
	if s.interrupt(r, rep) {
		return
	}
	var output []any
	idx := 0
	if rep.Text != "" {
		item := map[string]any{"type": "message", "id": "msg_test", "status": "in_progress", "role": "assistant", "content": []any{}}
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		ev("response.content_part.added", map[string]any{"item_id": "msg_test", "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, c := range chunks(rep.Text, 3) {
			ev("response.output_text.delta", map[string]any{"item_id": "msg_test", "output_index": idx, "content_index": 0, "delta": c, "logprobs": []any{}})
		}
		if rep.StreamError {
			ev("error", map[string]any{"code": orDefault(rep.ErrorType, "server_error"), "message": orDefault(rep.ErrorMessage, "The server had an error"), "param": nil})
			return
		}
		part := map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}
		ev("response.output_text.done", map[string]any{"item_id": "msg_test", "output_index": idx, "content_index": 0, "text": rep.Text, "logprobs": []any{}})
		ev("response.content_part.done", map[string]any{"item_id": "msg_test", "output_index": idx, "content_index": 0, "part": part})
		done := map[string]any{"type": "message", "id": "msg_test", "status": "completed", "role": "assistant", "content": []any{part}}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": done})
		output = append(output, done)
		idx++
	} else if rep.StreamError {
		ev("error", map[string]any{"code": orDefault(rep.ErrorType, "server_error"), "message": orDefault(rep.ErrorMessage, "The server had an error"), "param": nil})
		return
	}
	for i, c := range rep.ToolCalls {
		id := fmt.Sprintf("fc_test_%d", i)
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"type": "function_call", "id": id, "call_id": c.ID, "name": c.Name, "arguments": "", "status": "in_progress"}})
		for _, part := range chunks(string(c.Input), 4) {
			ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": part})
		}
		ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": string(c.Input)})
		done := map[string]any{"type": "function_call", "id": id, "call_id": c.ID, "name": c.Name, "arguments": string(c.Input), "status": "completed"}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": done})
		output = append(output, done)
		idx++
	}
	u := rep.Usage
	final := resp("completed", output)
	final["usage"] = map[string]any{
		"input_tokens": u.InputTokens + u.CacheReadTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CacheReadTokens},
		"output_tokens": u.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.InputTokens + u.CacheReadTokens + u.OutputTokens,
	}
	switch stopOf(rep) {
	case model.StopMaxTokens:
		final["status"] = "incomplete"
		final["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		ev("response.incomplete", map[string]any{"response": final})
	default:
		ev("response.completed", map[string]any{"response": final})
	}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, rep Reply) {
	e := startSSE(w)
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	chunk := func(choices []any, usage any) map[string]any {
		m := map[string]any{"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": created, "model": modelOf(s, rep),
			"system_fingerprint": "fp_test", "choices": choices}
		if usage != nil {
			m["usage"] = usage
		}
		return m
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	e.event("", chunk(choice(map[string]any{"role": "assistant", "content": ""}, nil), nil))
	if s.interrupt(r, rep) {
		return
	}
	for _, c := range chunks(rep.Text, 3) {
		e.event("", chunk(choice(map[string]any{"content": c}, nil), nil))
	}
	if rep.StreamError {
		// As OpenRouter and LiteLLM do: an error object in the stream.
		code := any(orDefault(rep.ErrorType, "server_error"))
		e.event("", map[string]any{"error": map[string]any{"message": orDefault(rep.ErrorMessage, "upstream error"), "code": code}})
		return
	}
	for i, c := range rep.ToolCalls {
		e.event("", chunk(choice(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil), nil))
		for _, part := range chunks(string(c.Input), 4) {
			e.event("", chunk(choice(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil), nil))
		}
	}
	finish := map[model.StopReason]string{model.StopEndTurn: "stop", model.StopToolUse: "tool_calls", model.StopMaxTokens: "length", model.StopRefusal: "content_filter"}[stopOf(rep)]
	e.event("", chunk(choice(map[string]any{}, orDefault(finish, "stop")), nil))
	u := rep.Usage
	// Some servers (vLLM) send "choices": null here; OpenAI sends [].
	usage := chunk(nil, map[string]any{"prompt_tokens": u.InputTokens + u.CacheReadTokens, "completion_tokens": u.OutputTokens,
		"total_tokens": u.InputTokens + u.CacheReadTokens + u.OutputTokens, "prompt_tokens_details": map[string]any{"cached_tokens": u.CacheReadTokens}})
	e.event("", usage)
	e.event("", "[DONE]")
}
