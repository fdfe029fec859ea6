package native

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/tools"
)

// EventType names a line of a native attempt's output.
type EventType string

// The events, in the order an attempt writes them.
const (
	// EventStarted opens the log: provider, model, tools, budget.
	EventStarted EventType = "native_started"
	// EventRequest summarises what one turn sends.
	EventRequest EventType = "model_request"
	// EventModelError is a failed model call, retried or not.
	EventModelError EventType = "model_error"
	// EventResponse is the model's whole answer: what a replay needs.
	EventResponse EventType = "model_response"
	// EventToolCall and EventToolResult frame each tool call.
	EventToolCall   EventType = "tool_call"
	EventToolResult EventType = "tool_result"
	// EventFinished closes the log with the attempt's outcome and totals.
	EventFinished EventType = "native_finished"
)

// Bounds of what one event carries. A response is kept whole up to
// MaxResponseEvent so that a recording replays; past it the text and the
// inputs are cut and the event is marked Truncated.
const (
	MaxResponseEvent = 1 << 20
	maxToolInput     = 2 << 10
	maxToolOutput    = 8 << 10
	maxSummary       = 512
)

// Event is one line of a native attempt's output: a JSON object whose
// "type" says which of the fields are set.
type Event struct {
	Type EventType `json:"type"`
	Turn int       `json:"turn,omitempty"`
	// State is the loop's state the event was written in: init, think, act, done.
	State string `json:"state,omitempty"`

	// native_started
	Provider string   `json:"provider,omitempty"`
	Model    string   `json:"model,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	Budget   *Budget  `json:"budget,omitempty"`

	// model_request
	Messages        int    `json:"messages,omitempty"`
	MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
	Last            string `json:"last,omitempty"` // the newest message, cut short

	// model_error
	Kind         model.Kind `json:"kind,omitempty"`
	Status       int        `json:"status,omitempty"`
	ErrorType    string     `json:"error_type,omitempty"`
	RetryAfterMS int64      `json:"retry_after_ms,omitempty"`
	Try          int        `json:"try,omitempty"`     // 1 for the first call of a turn
	WaitMS       int64      `json:"wait_ms,omitempty"` // before the next try; 0 when none follows

	// model_response
	Response  *model.Response `json:"response,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`

	// tool_call, tool_result
	CallID   string          `json:"call_id,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Output   string          `json:"output,omitempty"`
	IsError  bool            `json:"is_error,omitempty"`
	Refusal  *tools.Refusal  `json:"refusal,omitempty"`
	ExitCode *int            `json:"exit_code,omitempty"`

	// model_error, native_finished
	Message string `json:"message,omitempty"`

	// native_finished
	Outcome   Outcome               `json:"outcome,omitempty"`
	Class     drovertype.ErrorClass `json:"class,omitempty"`
	Turns     int                   `json:"turns,omitempty"`
	Usage     *model.Usage          `json:"usage,omitempty"`
	CostUSD   float64               `json:"cost_usd,omitempty"`
	ToolCalls map[string]int        `json:"tool_calls,omitempty"`
	Refusals  int                   `json:"refusals,omitempty"`

	DurationMS int64 `json:"duration_ms,omitempty"`
}

// eventWriter writes events as JSON lines, one Write per line. The first
// write error is kept and later events are dropped: the run goes on.
type eventWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
	buf bytes.Buffer
}

func (ew *eventWriter) write(e *Event) {
	if ew.w == nil {
		return
	}
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return
	}
	ew.buf.Reset()
	enc := json.NewEncoder(&ew.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		ew.err = fmt.Errorf("native: encode %s event: %w", e.Type, err)
		return
	}
	if _, err := ew.w.Write(ew.buf.Bytes()); err != nil {
		ew.err = fmt.Errorf("native: write %s event: %w", e.Type, err)
	}
}

// responseEvent records a response whole, or cut to MaxResponseEvent.
func responseEvent(turn int, r *model.Response) *Event {
	e := &Event{Type: EventResponse, Turn: turn, State: "think", Response: r}
	size := len(r.Text)
	for _, c := range r.ToolCalls {
		size += len(c.Input) + len(c.Name) + len(c.ID)
	}
	if size <= MaxResponseEvent {
		return e
	}
	cut := *r
	cut.Text = headTail(r.Text, MaxResponseEvent/4)
	cut.ToolCalls = make([]model.ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		cut.ToolCalls[i] = model.ToolCall{ID: c.ID, Name: c.Name}
		if len(c.Input) <= maxToolInput {
			cut.ToolCalls[i].Input = c.Input
		}
	}
	e.Response, e.Truncated = &cut, true
	return e
}

// boundedInput keeps a tool input that is small and valid JSON.
func boundedInput(in json.RawMessage) json.RawMessage {
	if len(in) > maxToolInput || !json.Valid(in) {
		return nil
	}
	return in
}

// headTail keeps the first and last n/2 bytes of s, marking the cut.
func headTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := n / 2
	return strings.ToValidUTF8(s[:h], "") + fmt.Sprintf("\n…[%d bytes left out]…\n", len(s)-n) + strings.ToValidUTF8(s[len(s)-h:], "")
}

// summary is the newest message of a conversation in one short line.
func summary(m model.Message) string {
	var b strings.Builder
	b.WriteString(string(m.Role) + ": ")
	if m.Text != "" {
		b.WriteString(m.Text)
	}
	for _, r := range m.ToolResults {
		fmt.Fprintf(&b, " [%s result, %d bytes", r.Name, len(r.Content))
		if r.IsError {
			b.WriteString(", error")
		}
		b.WriteString("]")
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	return s
}

// Recording is what a native attempt's log holds for a replay: every
// model call in order, each either a response or an error.
type Recording struct {
	Provider, Model string
	Calls           []RecordedCall
	// Final is the native_finished event, when the log has one.
	Final *Event
}

// RecordedCall is one model call: exactly one of Response and Err is set.
type RecordedCall struct {
	Turn     int
	Response *model.Response
	Err      *model.Error
}

// ErrNotReplayable is returned by ReadLog for a log that cannot drive a
// replay (a response cut short, calls out of order).
var ErrNotReplayable = errors.New("native: log cannot be replayed")

// maxLogLine bounds one line ReadLog accepts: a response event at its
// largest, with room for JSON escaping.
const maxLogLine = 8 * MaxResponseEvent

// ReadLog reads a native attempt's output back into a Recording. Lines
// that are not native events (an attempt's log may interleave other
// output) are skipped; a native event that does not decode, or a response
// that was cut, is an error.
func ReadLog(r io.Reader) (*Recording, error) {
	rec := &Recording{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	line := 0
	turn := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			if bytes.Contains(b, []byte(`"type":"native_`)) || bytes.Contains(b, []byte(`"type":"model_`)) {
				return nil, fmt.Errorf("%w: line %d: %v", ErrNotReplayable, line, err)
			}
			continue
		}
		switch e.Type {
		case EventStarted:
			rec.Provider, rec.Model = e.Provider, e.Model
		case EventModelError:
			if e.Turn < turn || e.Turn > turn+1 {
				return nil, fmt.Errorf("%w: line %d: turn %d after turn %d", ErrNotReplayable, line, e.Turn, turn)
			}
			if e.Kind == "" {
				return nil, fmt.Errorf("%w: line %d: model_error without a kind", ErrNotReplayable, line)
			}
			rec.Calls = append(rec.Calls, RecordedCall{Turn: e.Turn, Err: &model.Error{
				Kind: e.Kind, Provider: rec.Provider, Status: e.Status, Type: e.ErrorType, Message: e.Message,
				RetryAfter: msDuration(e.RetryAfterMS),
			}})
		case EventResponse:
			if e.Turn != turn+1 {
				return nil, fmt.Errorf("%w: line %d: response of turn %d after turn %d", ErrNotReplayable, line, e.Turn, turn)
			}
			if e.Truncated || e.Response == nil {
				return nil, fmt.Errorf("%w: line %d: the response of turn %d was cut in the log", ErrNotReplayable, line, e.Turn)
			}
			turn = e.Turn
			rec.Calls = append(rec.Calls, RecordedCall{Turn: e.Turn, Response: e.Response})
		case EventFinished:
			f := e
			rec.Final = &f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotReplayable, err)
	}
	return rec, nil
}
