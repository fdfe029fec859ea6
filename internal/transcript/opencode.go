package transcript

import (
	"encoding/json"
	"strings"

	"github.com/drover-dev/drover/internal/drovertype"
)

// openCodeRules classifies opencode run --format json and kilo run --format
// json (the same shape). Paths are under testdata/transcripts/; the rest is
// in docs/runtimes.md#opencode and #kilo. isRetryable, when present,
// overrides a row's retry.
var openCodeRules = []rule{
	// opencode/fail-401, kilo/fail-401 stdout.txt: error.data "statusCode":401,"isRetryable":false
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// Not recorded: the same APIError shape with 403, the other status an
	// OpenAI-compatible server refuses credentials with.
	{in: fromJSON, status: 403, class: drovertype.ClassAuthFailed},
	// opencode/fail-429, kilo/fail-429 stdout.txt: "statusCode":429,"isRetryable":true
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// Not recorded: the same error shape with a 5xx status (server trouble, retryable)
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// kilo/fail-401/stderr.txt: "Error: Incorrect API key provided: mock****. (mockllm)" (ANSI stripped).
	// kilo repeats the stdout error there (statusCode 401); a hint, as stdout says it
	// better, but the one a stop while it runs may see first.
	{in: fromText, text: re(`^Error: .*\b(?:Incorrect|Invalid) API key\b`), implies: 401, class: drovertype.ClassAuthFailed, hint: true},
	// kilo/fail-429/stderr.txt: "Error: Rate limit reached for requests (mockllm). Please try again in 1s."
	{in: fromText, text: re(`^Error: .*\bRate limit reached\b`), implies: 429, class: drovertype.ClassRateLimited, retry: true, hint: true},
	// docs/runtimes.md: kilo prints its fatal errors on stderr as `Error: <message>` (ANSI colored)
	{in: fromText, text: re(`^Error: `), class: drovertype.ClassRuntimeError, hint: true},
	// Any other error line, or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var openCodeSpec = &spec{
	format: drovertype.FormatOpenCodeJSON,
	rules:  openCodeRules,
	decode: decodeOpenCode,
	// No final line: success/stdout.txt ends with a step_finish like any
	// other step, fail-*/stdout.txt with the error line alone.
	final: "",
}

// openCodeLine is every opencode/kilo json line type at once
// (docs/runtimes.md#opencode).
type openCodeLine struct {
	Type string `json:"type"`
	Part *struct {
		Type   string `json:"type"`
		Tool   string `json:"tool"`
		Text   string `json:"text"`
		Reason string `json:"reason"`
		State  *struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Output   string          `json:"output"`
			Error    string          `json:"error"`
			Metadata *struct {
				Filepath string `json:"filepath"`
			} `json:"metadata"`
		} `json:"state"`
		Tokens *struct {
			Input  *int64 `json:"input"`
			Output *int64 `json:"output"`
			Cache  struct {
				Read  *int64 `json:"read"`
				Write *int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost *float64 `json:"cost"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data *struct {
			Message         string            `json:"message"`
			StatusCode      int               `json:"statusCode"`
			IsRetryable     *bool             `json:"isRetryable"`
			ResponseHeaders map[string]string `json:"responseHeaders"`
		} `json:"data"`
	} `json:"error"`
}

// openCodeWriters are the file-writing tools among those opencode and kilo
// offered (success/mock-requests.jsonl); only their filepath is a write.
var openCodeWriters = map[string]bool{"write": true, "edit": true}

func decodeOpenCode(p *parser, line []byte) bool {
	var l openCodeLine
	if !decodeJSON(line, &l) {
		return false
	}
	switch l.Type {
	case "text":
		if l.Part != nil && l.Part.Text != "" {
			p.push(Event{Kind: KindAssistantText, Text: l.Part.Text})
			p.addTurn(l.Part.Text, "\n")
		}
	case "tool_use":
		if l.Part == nil || l.Part.State == nil {
			break
		}
		st := l.Part.State
		p.newTurn()
		p.push(Event{Kind: KindToolCall, Tool: l.Part.Tool, Input: st.Input})
		switch st.Status {
		case "completed":
			p.push(Event{Kind: KindToolResult, Tool: l.Part.Tool, Text: st.Output})
			// success/stdout.txt: "metadata":{"filepath":"$RUN/repo/hello.txt",...}
			if st.Metadata != nil && openCodeWriters[l.Part.Tool] {
				p.addFile(st.Metadata.Filepath)
			}
		case "error":
			p.push(Event{Kind: KindToolResult, Tool: l.Part.Tool, Text: st.Error, IsError: true})
		}
	case "step_finish":
		// success/stdout.txt: one step_finish per model call; the run's usage is their sum.
		if l.Part != nil && l.Part.Tokens != nil {
			t := l.Part.Tokens
			add(&p.usage.InputTokens, t.Input)
			add(&p.usage.OutputTokens, t.Output)
			add(&p.usage.CacheReadTokens, t.Cache.Read)
			add(&p.usage.CacheWriteTokens, t.Cache.Write)
		}
		if l.Part != nil {
			add(&p.usage.CostUSD, l.Part.Cost)
		}
	case "error":
		sig := &signal{}
		if e := l.Error; e != nil {
			sig.code, sig.text = e.Name, e.Name
			if d := e.Data; d != nil {
				sig.status = d.StatusCode
				sig.retryable = d.IsRetryable
				if d.Message != "" {
					sig.text = d.Message
				}
				for k, v := range d.ResponseHeaders {
					// fail-429/stdout.txt: "responseHeaders":{...,"retry-after":"1"}
					if strings.EqualFold(k, "retry-after") {
						sig.retryAfter, sig.resetAt = retryAfterHeader(v)
					}
				}
			}
		}
		p.push(Event{Kind: KindError, Text: sig.text, IsError: true})
		p.setFatal(sig)
	}
	return true
}
