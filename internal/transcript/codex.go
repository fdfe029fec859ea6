package transcript

import (
	"encoding/json"

	"github.com/drover-dev/drover/internal/drovertype"
)

// codexRules classifies codex exec --json. Paths are under
// testdata/transcripts/codex/; the rest is in docs/runtimes.md#codex. The status
// comes from the message text (statusPatterns): codex has no status field.
var codexRules = []rule{
	// fail-401/stdout.txt: turn.failed "unexpected status 401 Unauthorized: Incorrect API key provided: ..."
	{in: fromJSON, status: 401, class: drovertype.ClassAuthFailed},
	// fail-401/stdout.txt: the same line names the status "Unauthorized"
	{in: fromJSON, text: re(`\bUnauthorized\b`), implies: 401, class: drovertype.ClassAuthFailed},
	// fail-429/stdout.txt: turn.failed "exceeded retry limit, last status: 429 Too Many Requests"
	{in: fromJSON, status: 429, class: drovertype.ClassRateLimited, retry: true},
	// fail-429/stdout.txt: the same line names the status "Too Many Requests"
	{in: fromJSON, text: re(`\bToo Many Requests\b`), implies: 429, class: drovertype.ClassRateLimited, retry: true},
	// docs/runtimes.md#quota-messages: a ChatGPT plan past its limit, "You've hit your usage
	// limit. Upgrade to Pro (…) or try again in 5 days 22 hours 11 minutes.", or the body
	// {"error":{"type":"usage_limit_reached",…}}
	{in: fromJSON | fromText, text: re(`(?i)\bhit your usage limit\b|\busage_limit_reached\b`), implies: 429,
		class: drovertype.ClassRateLimited, retry: true},
	// missing-env/stdout.txt: config.toml's env_key names a variable codex does not see:
	// error and turn.failed "Missing environment variable: `MOCK_API_KEY`."; in text mode
	// the same as "ERROR: ..." on stderr. No key: the credentials are missing.
	{in: fromJSON | fromText, text: re(`^(?:ERROR: )?Missing environment variable: `), class: drovertype.ClassAuthFailed},
	// Not recorded: fail-401/stdout.txt's "unexpected status N" with a 5xx status (server trouble, retryable)
	{in: fromJSON, status: statusServer, class: drovertype.ClassRuntimeError, retry: true},
	// docs/runtimes.md: `Error loading config.toml: wire_api = "chat" is no longer supported.` (exit 1)
	{in: fromText, text: re(`^Error loading config\.toml`), class: drovertype.ClassRuntimeError},
	// Any other turn.failed, or a failed exit.
	{in: fromJSON | fromExit, class: drovertype.ClassRuntimeError},
}

var codexSpec = &spec{
	format: drovertype.FormatCodexJSON,
	rules:  codexRules,
	decode: decodeCodex,
	// success/stdout.txt ends with turn.completed, fail-*/stdout.txt with turn.failed.
	final: `"type":"turn.completed" or "turn.failed"`,
}

// codexLine is every codex exec --json line type at once
// (docs/runtimes.md#codex).
type codexLine struct {
	Type    string     `json:"type"`
	Message string     `json:"message"` // error
	Item    *codexItem `json:"item"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens           *int64 `json:"input_tokens"`
		CachedInputTokens     *int64 `json:"cached_input_tokens"`
		CacheWriteInputTokens *int64 `json:"cache_write_input_tokens"`
		OutputTokens          *int64 `json:"output_tokens"`
	} `json:"usage"`
}

type codexItem struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	Text             string `json:"text"`
	Message          string `json:"message"`
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
}

func decodeCodex(p *parser, line []byte) bool {
	var l codexLine
	if !decodeJSON(line, &l) {
		return false
	}
	switch l.Type {
	case "item.started", "item.completed":
		if l.Item != nil {
			p.codexItem(l.Type == "item.completed", l.Item)
		}
	case "error":
		// fail-*/stdout.txt: "Reconnecting... 1/5 (unexpected status 401 ...)": codex retries on its own.
		p.push(Event{Kind: KindError, Text: l.Message, IsError: true})
		p.setHint(&signal{text: l.Message})
	case "turn.failed":
		p.sawFinal = true
		msg := ""
		if l.Error != nil {
			msg = l.Error.Message
		}
		p.push(Event{Kind: KindResult, Text: msg, IsError: true})
		p.setFatal(&signal{text: msg})
	case "turn.completed":
		p.sawFinal = true
		if u := l.Usage; u != nil {
			add(&p.usage.InputTokens, u.InputTokens)
			add(&p.usage.OutputTokens, u.OutputTokens)
			add(&p.usage.CacheReadTokens, u.CachedInputTokens)
			add(&p.usage.CacheWriteTokens, u.CacheWriteInputTokens)
		}
		p.push(Event{Kind: KindResult, Text: p.final})
		p.setFatal(nil)
	}
	return true
}

func (p *parser) codexItem(done bool, it *codexItem) {
	switch it.Type {
	case "agent_message":
		if done {
			p.push(Event{Kind: KindAssistantText, Text: it.Text})
			p.final = clip(it.Text, MaxFinal)
		}
	case "error":
		// success/stdout.txt: "Model metadata for `mock-model` not found. ..." — a warning, the run went on.
		p.push(Event{Kind: KindError, Text: it.Message})
	case "command_execution":
		if !done {
			in, _ := json.Marshal(struct {
				Command string `json:"command"`
			}{it.Command})
			p.push(Event{Kind: KindToolCall, Tool: it.Type, Text: it.Command, Input: in})
			break
		}
		failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
		p.push(Event{Kind: KindToolResult, Tool: it.Type, Text: it.AggregatedOutput, IsError: failed})
	default:
		if done && it.Type != "" {
			p.push(Event{Kind: KindToolResult, Tool: it.Type, Text: it.Text, IsError: it.Status == "failed"})
		}
	}
}
