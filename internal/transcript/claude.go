package transcript

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/drovertype"
)

// codePermissionDenied is the code the claude decoder gives a result whose
// permission_denials list is not empty.
const codePermissionDenied = "permission_denied"

// claudeRules classifies claude -p --output-format stream-json --verbose.
// Paths are under testdata/transcripts/claude/; the rest is in
// docs/runtimes.md#claude.
var claudeRules = []rule{
	// fail-401/stdout.txt: result "is_error":true,"api_error_status":401
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// fail-401/stdout.txt: assistant "error":"authentication_failed"; api_retry "error":"authentication_failed"
	{in: fromJSON, code: "authentication_failed", class: drovertype.ClassAuthFailed},
	// fail-401/stdout.txt: result "Invalid API key · Fix external API key"
	{in: fromJSON | fromText, text: re(`Invalid API key`), class: drovertype.ClassAuthFailed},
	// docs/runtimes.md, no credentials: "Not logged in · Please run /login" (result is_error:true)
	{in: fromJSON | fromText, text: re(`Not logged in`), class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: result "api_error_status":429; api_retry "error_status":429
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// fail-429/stdout.txt: assistant "error":"rate_limit"
	{in: fromJSON, code: "rate_limit", class: drovertype.ClassRateLimited, retry: true},
	// docs/runtimes.md#quota-messages: a subscription past its limit, result
	// "Claude AI usage limit reached|1749924000", "Claude usage limit reached. Your limit
	// will reset at 1pm (Etc/GMT+5).", "You've hit your session limit · resets 12:50am (…)"
	{in: fromJSON | fromText, text: re(`(?i)\busage limit reached\b|\bhit your (?:session |weekly |usage )?limit\b|\bout of extra usage\b`),
		implies: 429, class: drovertype.ClassRateLimited, retry: true},
	// docs/runtimes.md: 500/529 (CLAUDE_CODE_MAX_RETRIES=0) "API Error: 500 ..."/"529 ..."
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md: assistant "error":"server_error"
	{in: fromJSON, code: "server_error", class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md: no permission flag in -p mode: Write denied, exit 0,
	// is_error:false, result "permission_denials":[{"tool_name":"Write",...}]
	{in: fromJSON, code: codePermissionDenied, class: drovertype.ClassRuntimeError},
	// docs/runtimes.md: as root without IS_SANDBOX=1: exit 1, stderr
	// "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
	{in: fromText, text: re(`cannot be used with root/sudo privileges`), class: drovertype.ClassRuntimeError},
	// Any other result with is_error:true, or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var claudeSpec = &spec{
	format: drovertype.FormatClaudeStreamJSON,
	rules:  claudeRules,
	decode: decodeClaude,
	final:  `"type":"result"`,
}

// claudeLine is every claude stream-json line type at once
// (docs/runtimes.md#claude).
type claudeLine struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Model   string `json:"model"` // system/init

	Message *struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"` // blocks; a string in some user lines
	} `json:"message"`
	Error         string          `json:"error"` // assistant and api_retry: authentication_failed, rate_limit, server_error
	ToolUseResult json.RawMessage `json:"tool_use_result"`

	// system/api_retry
	Attempt      int     `json:"attempt"`
	MaxRetries   int     `json:"max_retries"`
	RetryDelayMS float64 `json:"retry_delay_ms"`
	ErrorStatus  int     `json:"error_status"`

	// result
	IsError           bool                        `json:"is_error"`
	APIErrorStatus    int                         `json:"api_error_status"`
	Result            string                      `json:"result"`
	TotalCostUSD      *float64                    `json:"total_cost_usd"`
	Usage             *claudeUsage                `json:"usage"`
	ModelUsage        map[string]claudeModelUsage `json:"modelUsage"`
	PermissionDenials []struct {
		ToolName string `json:"tool_name"`
	} `json:"permission_denials"`
}

type claudeUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

type claudeModelUsage struct {
	InputTokens              *int64   `json:"inputTokens"`
	OutputTokens             *int64   `json:"outputTokens"`
	CacheReadInputTokens     *int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens *int64   `json:"cacheCreationInputTokens"`
	CostUSD                  *float64 `json:"costUSD"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// claudeWriters are the tools in the recorded tool list (success/stdout.txt
// init "tools") whose tool_use_result names a file they wrote.
var claudeWriters = map[string]bool{"Write": true, "Edit": true, "NotebookEdit": true}

func decodeClaude(p *parser, line []byte) bool {
	var l claudeLine
	if !decodeJSON(line, &l) {
		return false
	}
	switch l.Type {
	case "system":
		switch l.Subtype {
		case "init":
			p.model = l.Model
			if p.usage.Model == "" {
				p.usage.Model = l.Model
			}
		case "api_retry":
			p.retryDelay = millis(l.RetryDelayMS)
			text := "api_retry " + strconv.Itoa(l.Attempt) + "/" + strconv.Itoa(l.MaxRetries)
			if l.ErrorStatus != 0 {
				text += ": " + strconv.Itoa(l.ErrorStatus)
			}
			if l.Error != "" {
				text += " " + l.Error
			}
			p.push(Event{Kind: KindError, Text: text, IsError: true})
			p.setHint(&signal{status: l.ErrorStatus, code: l.Error, text: text, retryAfter: p.retryDelay})
		}
	case "assistant":
		if l.Error != "" {
			p.errCode = l.Error
		}
		if l.Message == nil {
			break
		}
		var blocks []claudeBlock
		decodeJSON(l.Message.Content, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case "text":
				p.push(Event{Kind: KindAssistantText, Text: b.Text, IsError: l.Error != ""})
			case "tool_use":
				remember(&p.tools, b.ID, b.Name)
				p.push(Event{Kind: KindToolCall, Tool: b.Name, Input: b.Input})
			}
		}
	case "user":
		if l.Message == nil {
			break
		}
		var blocks []claudeBlock
		decodeJSON(l.Message.Content, &blocks)
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			tool := recall(p.tools, b.ToolUseID)
			p.push(Event{Kind: KindToolResult, Tool: tool, Text: textOf(b.Content), IsError: b.IsError})
			if b.IsError {
				continue
			}
			// success/stdout.txt: "tool_use_result":{"type":"create","filePath":...}
			if claudeWriters[tool] || stringField(l.ToolUseResult, "type") == "create" {
				p.addFile(stringField(l.ToolUseResult, "filePath"))
			}
		}
	case "result":
		p.sawFinal = true
		p.final = clip(l.Result, MaxFinal)
		p.claudeUsage(&l)
		p.push(Event{Kind: KindResult, Text: l.Result, IsError: l.IsError})
		switch {
		case l.IsError:
			// result.subtype is "success" even on errors: read is_error
			// (fail-401/stdout.txt).
			p.setFatal(&signal{status: l.APIErrorStatus, code: p.errCode, text: l.Result, retryAfter: p.retryDelay})
		case len(l.PermissionDenials) > 0:
			p.setFatal(&signal{code: codePermissionDenied, text: claudeDenied(&l)})
		default:
			p.setFatal(nil)
		}
	}
	return true
}

// claudeUsage takes the totals of a result line: usage, else the sum of
// modelUsage (success/stdout.txt: 38432 in / 24 out in both).
func (p *parser) claudeUsage(l *claudeLine) {
	u := &p.usage
	names := make([]string, 0, len(l.ModelUsage))
	for name := range l.ModelUsage {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 1 {
		u.Model = names[0]
	} else if p.model != "" {
		u.Model = p.model
	}
	u.CostUSD = l.TotalCostUSD
	if l.Usage != nil {
		u.InputTokens = l.Usage.InputTokens
		u.OutputTokens = l.Usage.OutputTokens
		u.CacheReadTokens = l.Usage.CacheReadInputTokens
		u.CacheWriteTokens = l.Usage.CacheCreationInputTokens
		return
	}
	var sum Usage
	for _, name := range names {
		m := l.ModelUsage[name]
		add(&sum.InputTokens, m.InputTokens)
		add(&sum.OutputTokens, m.OutputTokens)
		add(&sum.CacheReadTokens, m.CacheReadInputTokens)
		add(&sum.CacheWriteTokens, m.CacheCreationInputTokens)
		add(&sum.CostUSD, m.CostUSD)
	}
	u.InputTokens, u.OutputTokens = sum.InputTokens, sum.OutputTokens
	u.CacheReadTokens, u.CacheWriteTokens = sum.CacheReadTokens, sum.CacheWriteTokens
	if u.CostUSD == nil {
		u.CostUSD = sum.CostUSD
	}
}

// claudeDenied says which tools were denied.
func claudeDenied(l *claudeLine) string {
	seen := map[string]bool{}
	var tools []string
	for _, d := range l.PermissionDenials {
		if d.ToolName != "" && !seen[d.ToolName] && len(tools) < 20 {
			seen[d.ToolName] = true
			tools = append(tools, d.ToolName)
		}
	}
	msg := "permission denied for tools: " + strings.Join(tools, ", ")
	if len(tools) == 0 {
		msg = "permission denied for " + strconv.Itoa(len(l.PermissionDenials)) + " tool calls"
	}
	if l.Result != "" {
		msg += " (result: " + l.Result + ")"
	}
	return msg
}
