package transcript

import (
	"encoding/json"

	"github.com/drover-dev/drover/internal/drovertype"
)

// piRules classifies pi -p ... --mode json. Paths are under
// testdata/transcripts/pi/; the rest is in docs/runtimes.md#pi. pi exits 0
// on 401 and 429 (fail-*/meta.json): only these rows see those failures.
var piRules = []rule{
	// fail-401/stdout.txt: message_end "stopReason":"error","errorMessage":"401 Incorrect API key provided: ..."
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: auto_retry_end "success":false,"finalError":"429 Rate limit reached for requests ..."
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// Not recorded: the same "<status> <message>" shape with a 5xx status (server trouble, retryable)
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md, no credentials: exit 1, stderr "No API key found for the selected model."
	{in: fromText, text: re(`^No API key found\b`), class: drovertype.ClassAuthFailed},
	// Any other stopReason "error", or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var piSpec = &spec{
	format: drovertype.FormatPiJSON,
	rules:  piRules,
	decode: decodePi,
	// success/stdout.txt and fail-*/stdout.txt all have agent_end once the
	// agent stopped (fail-429 then retries: auto_retry_start ... auto_retry_end).
	final: `"type":"agent_end"`,
}

// piLine is every pi json line type this package reads
// (docs/runtimes.md#pi).
// message_update lines repeat the partial message and are skipped.
type piLine struct {
	Type       string          `json:"type"`
	Message    *piMessage      `json:"message"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	Result     *struct {
		Content json.RawMessage `json:"content"`
	} `json:"result"`
	IsError bool `json:"isError"`
	// auto_retry_start / auto_retry_end
	Success      *bool  `json:"success"`
	FinalError   string `json:"finalError"`
	ErrorMessage string `json:"errorMessage"`
}

type piMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Model   string          `json:"model"`
	Usage   *struct {
		Input      *int64 `json:"input"`
		Output     *int64 `json:"output"`
		CacheRead  *int64 `json:"cacheRead"`
		CacheWrite *int64 `json:"cacheWrite"`
		Cost       struct {
			Total *float64 `json:"total"`
		} `json:"cost"`
	} `json:"usage"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
}

// piWriters are pi's file-writing tools; both take "path"
// (success/mock-requests.jsonl tool declarations).
var piWriters = map[string]bool{"write": true, "edit": true}

func decodePi(p *parser, line []byte) bool {
	if piSkip(line) {
		return true
	}
	var l piLine
	if !decodeJSON(line, &l) {
		return false
	}
	switch l.Type {
	case "message_end":
		if m := l.Message; m != nil && m.Role == "assistant" {
			p.piAssistant(m)
		}
	case "tool_execution_start":
		if piWriters[l.ToolName] {
			remember(&p.paths, l.ToolCallID, stringField(l.Args, "path"))
		}
	case "tool_execution_end":
		text := ""
		if l.Result != nil {
			text = textOf(l.Result.Content)
		}
		p.push(Event{Kind: KindToolResult, Tool: l.ToolName, Text: text, IsError: l.IsError})
		if !l.IsError {
			// success/stdout.txt: tool_execution_start "toolName":"write","args":{"path":"$RUN/repo/hello.txt",...}
			p.addFile(recall(p.paths, l.ToolCallID))
		}
	case "auto_retry_start":
		// fail-429/stdout.txt: pi retries on its own (attempt 1..3)
		p.push(Event{Kind: KindError, Text: l.ErrorMessage, IsError: true})
		p.setHint(&signal{text: l.ErrorMessage})
	case "auto_retry_end":
		if l.Success != nil && !*l.Success {
			p.push(Event{Kind: KindError, Text: l.FinalError, IsError: true})
			p.setFatal(&signal{text: l.FinalError})
		} else {
			p.setFatal(nil)
		}
	case "agent_end":
		p.sawFinal = true
		p.push(Event{Kind: KindResult, Text: p.final, IsError: p.fatal != nil})
	}
	return true
}

// piSkip reports a message_update line without decoding it: each repeats
// the whole partial message (success/stdout.txt) and adds nothing the
// message_end after it does not have.
func piSkip(line []byte) bool {
	const prefix = `{"type":"message_update"`
	return len(line) > len(prefix) && string(line[:len(prefix)]) == prefix
}

func (p *parser) piAssistant(m *piMessage) {
	if m.Model != "" {
		p.usage.Model = m.Model
	}
	if u := m.Usage; u != nil {
		// success/stdout.txt: each message_end carries that call's usage; the run's is their sum.
		add(&p.usage.InputTokens, u.Input)
		add(&p.usage.OutputTokens, u.Output)
		add(&p.usage.CacheReadTokens, u.CacheRead)
		add(&p.usage.CacheWriteTokens, u.CacheWrite)
		add(&p.usage.CostUSD, u.Cost.Total)
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	decodeJSON(m.Content, &blocks)
	text := ""
	for _, b := range blocks {
		switch b.Type {
		case "text":
			p.push(Event{Kind: KindAssistantText, Text: b.Text})
			if text != "" {
				text += "\n"
			}
			text += clip(b.Text, MaxFinal)
		case "toolCall":
			remember(&p.tools, b.ID, b.Name)
			p.push(Event{Kind: KindToolCall, Tool: b.Name, Input: b.Arguments})
		}
	}
	if text != "" {
		p.final = clip(text, MaxFinal)
	}
	if m.StopReason == "error" {
		// fail-429/stdout.txt: pi retries after such an error on its own
		// (auto_retry_start follows) unless it is its last word.
		p.push(Event{Kind: KindError, Text: m.ErrorMessage, IsError: true})
		p.setRetriedFatal(&signal{text: m.ErrorMessage})
	} else {
		// A later good answer (after pi's own retry) clears an earlier error.
		p.setFatal(nil)
	}
}
