package nativetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/native/model"
)

// Reply is one scripted answer of a test server, in no provider's format:
// each server writes it in its own. Either an answer (Text, ToolCalls,
// Usage, Stop) or a failure (Status, or StreamError, Cut, Hang).
type Reply struct {
	Text      string
	ToolCalls []model.ToolCall
	Usage     model.Usage
	// Stop defaults to tool_use when there are calls, else end_turn.
	Stop  model.StopReason
	Model string

	// Status, when set, answers with this HTTP error instead of a stream,
	// in the provider's error format, with Header.
	Status int
	Header http.Header
	// ErrorType is the provider's error type or code (overloaded_error,
	// rate_limit_exceeded, …), for Status and StreamError.
	ErrorType    string
	ErrorMessage string
	// StreamError sends Text, then an error inside the 200 stream.
	StreamError bool
	// Cut sends the stream's first events and drops the connection.
	Cut bool
	// Hang sends the first events and waits until the client goes away.
	Hang bool
}

// Recorded is a request a server received.
type Recorded struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
	Raw          []byte
}

// Server is a test server for one provider's API. It checks the API key
// when Key is set, answers model queries for ModelID, and streams Replies
// in order; with none left it answers 500.
type Server struct {
	*httptest.Server
	Provider string
	Key      string
	ModelID  string

	mu       sync.Mutex
	replies  []Reply
	requests []Recorded
	hung     chan struct{}
	t        testing.TB
}

func newServer(t testing.TB, provider, key string, h func(s *Server, w http.ResponseWriter, r *http.Request)) *Server {
	s := &Server{Provider: provider, Key: key, ModelID: "test-model", t: t, hung: make(chan struct{}, 64)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		rec := Recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &rec.Body)
		}
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		h(s, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Push appends replies to the script.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

func (s *Server) next() (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) == 0 {
		return Reply{}, false
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r, true
}

// Requests are the requests received, in order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.requests...)
}

// Left is how many replies were not used.
func (s *Server) Left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Hung receives once per Hang reply, when the server starts waiting.
func (s *Server) Hung() <-chan struct{} { return s.hung }

// sse writes server-sent events and flushes each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name may be empty (Chat Completions sends data only).
func (e *sse) event(name string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			panic(err)
		}
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if e.f != nil {
		e.f.Flush()
	}
}

// interrupt ends a reply early as it asks: Cut drops the connection,
// Hang waits for the client to leave. It reports whether it did either.
func (s *Server) interrupt(r *http.Request, rep Reply) bool {
	switch {
	case rep.Cut:
		panic(http.ErrAbortHandler) // the server closes the connection mid-body
	case rep.Hang:
		s.hung <- struct{}{}
		<-r.Context().Done()
		return true
	}
	return false
}

// chunks splits s into up to n pieces, as a stream would deliver it.
func chunks(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > 0 {
		k := min(size, len(s))
		// Keep UTF-8 sequences whole.
		for k < len(s) && s[k]&0xC0 == 0x80 {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func stopOf(r Reply) model.StopReason {
	if r.Stop != "" {
		return r.Stop
	}
	if len(r.ToolCalls) > 0 {
		return model.StopToolUse
	}
	return model.StopEndTurn
}

func modelOf(s *Server, r Reply) string {
	if r.Model != "" {
		return r.Model
	}
	return s.ModelID
}

func writeJSON(w http.ResponseWriter, status int, header http.Header, body any) {
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}
