package nativetest

import (
	"net/http"
	"strings"
	"testing"
)

// NewAnthropic starts a server speaking Anthropic's Messages API: POST
// /v1/messages with stream=true answers as server-sent events
// (message_start, content_block_start/delta/stop, message_delta,
// message_stop), and GET /v1/models/{id} answers for ModelID. The key goes
// in the x-api-key header or as a bearer token. Its base URL is s.URL.
func NewAnthropic(t testing.TB, key string, replies ...Reply) *Server {
	s := newServer(t, "anthropic", key, serveAnthropic)
	s.Push(replies...)
	return s
}

func anthropicError(w http.ResponseWriter, status int, header http.Header, typ, msg string) {
	writeJSON(w, status, header, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func serveAnthropic(s *Server, w http.ResponseWriter, r *http.Request) {
	// The API takes the key in x-api-key; the SDK sends it as a bearer
	// token. Either is accepted.
	key := r.Header.Get("x-api-key")
	if key == "" {
		key = bearer(r)
	}
	if s.Key != "" && key != s.Key {
		anthropicError(w, 401, nil, "authentication_error", "invalid x-api-key")
		return
	}
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/models/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
		if id != s.ModelID {
			anthropicError(w, 404, nil, "not_found_error", "model: "+id)
			return
		}
		writeJSON(w, 200, nil, map[string]any{"type": "model", "id": id, "display_name": "Test Model", "created_at": "2025-01-01T00:00:00Z"})
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	default:
		anthropicError(w, 404, nil, "not_found_error", r.Method+" "+r.URL.Path)
		return
	}
	rep, ok := s.next()
	if !ok {
		anthropicError(w, 500, nil, "api_error", "the test script has no reply left")
		return
	}
	if rep.Status != 0 {
		anthropicError(w, rep.Status, rep.Header, orDefault(rep.ErrorType, "api_error"), orDefault(rep.ErrorMessage, "scripted failure"))
		return
	}
	e := startSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "content": []any{}, "model": modelOf(s, rep),
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.Usage.InputTokens, "output_tokens": 1,
			"cache_read_input_tokens": rep.Usage.CacheReadTokens, "cache_creation_input_tokens": rep.Usage.CacheWriteTokens},
	}})
	e.event("ping", map[string]any{"type": "ping"})
	if s.interrupt(r, rep) {
		return
	}
	idx := 0
	if rep.Text != "" {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, c := range chunks(rep.Text, 3) {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if rep.StreamError {
		e.event("error", map[string]any{"type": "error", "error": map[string]any{"type": orDefault(rep.ErrorType, "overloaded_error"), "message": orDefault(rep.ErrorMessage, "Overloaded")}})
		return
	}
	for _, c := range rep.ToolCalls {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		for _, part := range chunks(string(c.Input), 4) {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := map[string]string{"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens", "refusal": "refusal"}[string(stopOf(rep))]
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": orDefault(stop, "end_turn"), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Usage.OutputTokens}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
