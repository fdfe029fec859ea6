package transcript

import (
	"encoding/json"
	"sort"

	"github.com/drover-dev/drover/internal/drovertype"
)

// geminiRules classifies gemini -p ... --output-format stream-json. Paths
// are under testdata/transcripts/gemini/; the rest is in
// docs/runtimes.md#gemini.
var geminiRules = []rule{
	// fail-401/stdout.txt: result "status":"error", error.message
	// `[API Error: {"error":{"code":401,"message":"API key not valid...","status":"UNAUTHENTICATED"}}]`
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// fail-401/stdout.txt: the same message says "UNAUTHENTICATED"
	{in: fromJSON, text: re(`\bUNAUTHENTICATED\b`), implies: 401, class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: result error.message "[API Error: Resource has been exhausted (e.g. check quota). ...]"
	// carries no code; fail-429/stderr.txt shows it is `{"error":{"code":429,...,"status":"RESOURCE_EXHAUSTED"}}`.
	{in: fromJSON, text: re(`Resource has been exhausted|\bRESOURCE_EXHAUSTED\b`), implies: 429, class: drovertype.ClassRateLimited, retry: true},
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// docs/runtimes.md#quota-messages: "Quota exceeded for quota metric 'Gemini 2.5 Pro
	// Requests' …", "You exceeded your current quota, …", "You have exhausted your capacity
	// on this model. Your quota will reset after 12h34m16s."
	{in: fromJSON, text: re(`(?i)\bquota exceeded\b|\bexceeded your current quota\b|\bexhausted your capacity\b`), implies: 429,
		class: drovertype.ClassRateLimited, retry: true},
	// Not recorded: the same error shape with a 5xx status (server trouble, retryable)
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md, no credentials: exit 41, stderr "Please set an Auth method in your <HOME>/.gemini/settings.json ..."
	{in: fromText, text: re(`^Please set an Auth method\b`), class: drovertype.ClassAuthFailed},
	// docs/runtimes.md: GOOGLE_GEMINI_BASE_URL without an auth type: stderr "Invalid auth method selected." (exit 41)
	{in: fromText, text: re(`^Invalid auth method selected`), class: drovertype.ClassAuthFailed},
	// docs/runtimes.md: untrusted folder (no --skip-trust): exit 55, stderr "Gemini CLI is not running in a trusted directory..."
	{in: fromText, text: re(`is not running in a trusted directory`), class: drovertype.ClassRuntimeError},
	// fail-429/stderr.txt: "Attempt 1 failed with status 429. Retrying with backoff..." — gemini retries on its own
	{in: fromText, status: 429, text: re(`^Attempt \d+ failed with status 429\b`), class: drovertype.ClassRateLimited, retry: true, hint: true},
	// fail-429/stderr.txt: "Attempt 10 failed: Resource has been exhausted (e.g. check quota). (mockllm). Max attempts reached"
	{in: fromText, text: re(`^Attempt \d+ failed: Resource has been exhausted`), implies: 429, class: drovertype.ClassRateLimited, retry: true, hint: true},
	// fail-401/stderr.txt: "Error when talking to Gemini API ... _ApiError: {"error":{"code":401,...}}"
	{in: fromText, status: 401, text: re(`_ApiError: \{"error":\{"code":401\b`), class: drovertype.ClassAuthFailed, hint: true},
	// docs/runtimes.md: exit 41 without a result (no auth method)
	{in: fromExit, exit: 41, class: drovertype.ClassAuthFailed},
	// fail-401/meta.json: exit 145 (= 401 mod 256) in the JSON modes
	{in: fromExit, exit: 145, implies: 401, class: drovertype.ClassAuthFailed},
	// fail-429/meta.json: exit 173 (= 429 mod 256)
	{in: fromExit, exit: 173, implies: 429, class: drovertype.ClassRateLimited, retry: true},
	// docs/runtimes.md: untrusted folder, exit 55
	{in: fromExit, exit: 55, class: drovertype.ClassRuntimeError},
	// Any other result with status "error", or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var geminiSpec = &spec{
	format: drovertype.FormatGeminiStreamJSON,
	rules:  geminiRules,
	decode: decodeGemini,
	// gemini exits 0 on SIGTERM (docs/runtimes.md#gemini). Only the result
	// line says the run finished (success/stdout.txt and fail-*/stdout.txt all end with it).
	final: `"type":"result"`,
}

// geminiLine is every gemini stream-json line type at once
// (docs/runtimes.md#gemini).
type geminiLine struct {
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  *int64                     `json:"input_tokens"`
		OutputTokens *int64                     `json:"output_tokens"`
		Cached       *int64                     `json:"cached"`
		Models       map[string]json.RawMessage `json:"models"`
	} `json:"stats"`
}

// geminiWriters are gemini's file-writing tools and the parameter naming
// the file (success/mock-requests.jsonl tool declarations: write_file and
// replace both take "file_path").
var geminiWriters = map[string]bool{"write_file": true, "replace": true}

func decodeGemini(p *parser, line []byte) bool {
	var l geminiLine
	if !decodeJSON(line, &l) {
		return false
	}
	switch l.Type {
	case "init":
		p.usage.Model = l.Model
	case "message":
		// success/stdout.txt: the answer comes as "delta":true pieces.
		if l.Role == "assistant" && l.Content != "" {
			p.push(Event{Kind: KindAssistantText, Text: l.Content})
			p.addTurn(l.Content, "")
		}
	case "tool_use":
		p.newTurn()
		remember(&p.tools, l.ToolID, l.ToolName)
		if geminiWriters[l.ToolName] {
			remember(&p.paths, l.ToolID, stringField(l.Parameters, "file_path"))
		}
		p.push(Event{Kind: KindToolCall, Tool: l.ToolName, Input: l.Parameters})
	case "tool_result":
		failed := l.Status != "success"
		text := l.Output
		if l.Error != nil && l.Error.Message != "" {
			text = l.Error.Message
		}
		p.push(Event{Kind: KindToolResult, Tool: recall(p.tools, l.ToolID), Text: text, IsError: failed})
		if !failed {
			p.addFile(recall(p.paths, l.ToolID))
		}
	case "result":
		p.sawFinal = true
		if s := l.Stats; s != nil {
			p.usage.InputTokens = s.InputTokens
			p.usage.OutputTokens = s.OutputTokens
			p.usage.CacheReadTokens = s.Cached
			if len(s.Models) == 1 {
				for name := range s.Models {
					p.usage.Model = name
				}
			} else if len(s.Models) > 1 && p.usage.Model == "" {
				names := make([]string, 0, len(s.Models))
				for name := range s.Models {
					names = append(names, name)
				}
				sort.Strings(names)
				p.usage.Model = names[0]
			}
		}
		if l.Status == "error" {
			sig := &signal{text: "gemini result status error"}
			if l.Error != nil {
				sig.code, sig.text = l.Error.Type, l.Error.Message
			}
			p.push(Event{Kind: KindResult, Text: sig.text, IsError: true})
			p.setFatal(sig)
			break
		}
		p.push(Event{Kind: KindResult, Text: string(p.turn)})
		p.setFatal(nil)
	}
	return true
}
