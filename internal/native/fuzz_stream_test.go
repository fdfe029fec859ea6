package native_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// recordedBody captures what a test server streams for a reply, to seed
// the fuzzer with well-formed streams.
func recordedBody(t testing.TB, p provider, rep nativetest.Reply) string {
	srv := p.new(t, "", rep)
	path := map[string]string{"anthropic": "/v1/messages", "openai-responses": "/v1/responses", "openai-chat": "/v1/chat/completions"}[p.name]
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// FuzzProviderStreams feeds each client a 200 response whose event stream
// is anything at all: the stream comes from outside. A Turn must return a
// response or a *model.Error, never panic or hang.
func FuzzProviderStreams(f *testing.F) {
	calls := []model.ToolCall{nativetest.Call("c1", "bash", map[string]any{"command": "ls"})}
	for i, p := range providers {
		for _, rep := range []nativetest.Reply{
			{Text: "hello", ToolCalls: calls, Usage: usage(3, 4)},
			{Text: "cut", Stop: model.StopMaxTokens},
			{Text: "x", StreamError: true},
		} {
			f.Add(uint8(i), recordedBody(f, p, rep))
		}
	}
	f.Add(uint8(0), "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":-1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n")
	f.Add(uint8(2), "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-3,\"function\":{\"arguments\":\"{\\\"a\"}}]}}]}\n\ndata: [DONE]\n\n")
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body.Load().(string))
	}))
	defer srv.Close()
	clients := make([]model.Client, len(providers))
	for i, p := range providers {
		base := srv.URL
		if p.name != "anthropic" {
			base += "/v1"
		}
		clients[i], _ = native.NewClient(native.Config{Provider: p.name, BaseURL: base, Model: "m"}, "", nil)
	}
	req := &model.Request{Messages: []model.Message{{Role: model.User, Text: "hi"}}, MaxOutputTokens: 10}
	f.Fuzz(func(t *testing.T, which uint8, stream string) {
		body.Store(stream)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := clients[int(which)%len(clients)].Turn(ctx, req)
		if ctx.Err() != nil {
			t.Fatalf("the turn hung on %q", stream)
		}
		var me *model.Error
		switch {
		case err == nil && resp == nil:
			t.Fatal("no response and no error")
		case err != nil && !errors.As(err, &me):
			t.Fatalf("error %v (%T) is not a *model.Error", err, err)
		}
	})
}
