package transcript

import (
	"encoding/json"
	"strconv"

	"github.com/drover-dev/drover/internal/drovertype"
)

// copilotRules classifies copilot -p ... --output-format json. Paths are
// under testdata/transcripts/copilot/; the rest is in
// docs/runtimes.md#copilot.
var copilotRules = []rule{
	// fail-401/stdout.txt: session.error "errorType":"authentication","statusCode":401
	{in: fromJSON, code: "authentication", class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: session.error "errorType":"rate_limit","statusCode":429
	{in: fromJSON, code: "rate_limit", class: drovertype.ClassRateLimited, retry: true},
	// fail-401/stdout.txt: model.call_failure "statusCode":401 (a retry notice)
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: model.call_failure "statusCode":429 (a retry notice)
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// Not recorded: the same shapes with a 5xx status (server trouble, retryable)
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md, no credentials: exit 1, stderr "Error: No authentication information found."
	{in: fromText, text: re(`No authentication information found`), class: drovertype.ClassAuthFailed},
	// Any other session.error, a result with a non-zero exitCode, or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var copilotSpec = &spec{
	format: drovertype.FormatCopilotJSON,
	rules:  copilotRules,
	decode: decodeCopilot,
	// success/stdout.txt and fail-*/stdout.txt all end with result {exitCode}.
	final: `"type":"result"`,
}

// copilotLine is every copilot json line type this package reads
// (docs/runtimes.md#copilot).
type copilotLine struct {
	Type string `json:"type"`
	Data *struct {
		Content      string `json:"content"`
		Model        string `json:"model"`
		ToolRequests []struct {
			ToolCallID string          `json:"toolCallId"`
			Name       string          `json:"name"`
			Arguments  json.RawMessage `json:"arguments"`
		} `json:"toolRequests"`
		ToolCallID string `json:"toolCallId"`
		Success    *bool  `json:"success"`
		FileEdits  []struct {
			Path string `json:"path"`
		} `json:"fileEdits"`
		Result *struct {
			Content string `json:"content"`
		} `json:"result"`
		Error        json.RawMessage `json:"error"`
		ErrorType    string          `json:"errorType"`
		ErrorCode    string          `json:"errorCode"`
		Message      string          `json:"message"`
		ErrorMessage string          `json:"errorMessage"`
		StatusCode   int             `json:"statusCode"`
	} `json:"data"`
	ExitCode *int `json:"exitCode"`
	Usage    *struct {
		CodeChanges *struct {
			FilesModified []string `json:"filesModified"`
		} `json:"codeChanges"`
	} `json:"usage"`
}

func decodeCopilot(p *parser, line []byte) bool {
	var l copilotLine
	if !decodeJSON(line, &l) {
		return false
	}
	d := l.Data
	switch l.Type {
	case "assistant.message":
		if d == nil {
			break
		}
		if d.Model != "" {
			p.usage.Model = d.Model
		}
		p.hint = nil // a model call went through: earlier retry notices are stale
		if d.Content != "" {
			p.push(Event{Kind: KindAssistantText, Text: d.Content})
			p.final = clip(d.Content, MaxFinal)
		}
		for _, t := range d.ToolRequests {
			remember(&p.tools, t.ToolCallID, t.Name)
			p.push(Event{Kind: KindToolCall, Tool: t.Name, Input: t.Arguments})
		}
	case "tool.execution_complete":
		if d == nil {
			break
		}
		ok := d.Success == nil || *d.Success
		text := ""
		if d.Result != nil {
			text = d.Result.Content
		}
		if !ok && text == "" {
			text = textOf(d.Error)
			if text == "" {
				text = stringField(d.Error, "message")
			}
		}
		p.push(Event{Kind: KindToolResult, Tool: recall(p.tools, d.ToolCallID), Text: text, IsError: !ok})
		if ok {
			// success/stdout.txt: "fileEdits":[{"path":"$RUN/repo/hello.txt","kind":"create"}]
			for _, e := range d.FileEdits {
				p.addFile(e.Path)
			}
		}
	case "model.call_failure":
		// fail-*/stdout.txt: one per failed model call; copilot retries on its own.
		if d != nil {
			p.push(Event{Kind: KindError, Text: d.ErrorMessage, IsError: true})
			p.setHint(&signal{status: d.StatusCode, code: d.ErrorCode, text: d.ErrorMessage})
		}
	case "session.error":
		if d != nil {
			p.push(Event{Kind: KindError, Text: d.Message, IsError: true})
			p.setFatal(&signal{status: d.StatusCode, code: d.ErrorType, text: d.Message})
		}
	case "result":
		p.sawFinal = true
		if l.Usage != nil && l.Usage.CodeChanges != nil {
			// success/stdout.txt: "codeChanges":{"filesModified":["$RUN/repo/hello.txt"]}
			for _, f := range l.Usage.CodeChanges.FilesModified {
				p.addFile(f)
			}
		}
		failed := l.ExitCode != nil && *l.ExitCode != 0
		text := "exitCode 0"
		if l.ExitCode != nil {
			text = "exitCode " + strconv.Itoa(*l.ExitCode)
		}
		p.push(Event{Kind: KindResult, Text: text, IsError: failed})
		if failed && p.fatal == nil {
			sig := &signal{text: "copilot result " + text}
			if h := p.hint; h != nil && h.from == fromJSON {
				sig = &signal{status: h.status, code: h.code, text: h.text}
			}
			p.setFatal(sig)
		}
	}
	return true
}
