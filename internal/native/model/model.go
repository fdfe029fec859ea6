package model

import (
	"context"
	"encoding/json"
	"net/http"
)

// Client is one model endpoint. A Turn streams one response; a Check
// verifies the endpoint and the configuration without spending tokens.
// Implementations must be safe for concurrent use (a worker runs several
// attempts of one runtime at once) and must not retry on their own: the
// loop decides what a failure means (see Error).
type Client interface {
	// Turn sends the conversation and the tool definitions and returns the
	// model's answer once its stream has ended. Cancelling ctx aborts the
	// call at once, and Turn then returns ctx's error. Any other failure is
	// an *Error.
	Turn(ctx context.Context, req *Request) (*Response, error)
	// Check asks the endpoint about the configured model (a models
	// retrieve or list call, which costs no tokens). A refused key is an
	// *Error of KindAuth; an endpoint that does not answer is any other
	// error.
	Check(ctx context.Context) (*Endpoint, error)
}

// Endpoint is what a Check learned.
type Endpoint struct {
	Provider string // anthropic | openai-responses | openai-chat
	BaseURL  string
	Model    string // the model id as the endpoint names it
	Detail   string // e.g. the model's display name, or "listed" when only a list call answers
}

// Role says who wrote a Message.
type Role string

// The roles of a conversation. Tool results travel in a user message, as
// both providers' APIs expect them right after the assistant's calls.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Message is one entry of the conversation. A user message holds text or
// the results of the previous assistant message's tool calls (or both); an
// assistant message holds text and tool calls.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ToolCall is the model asking for a tool. Input is the arguments as the
// model wrote them: usually a JSON object, but nothing guarantees it is
// valid JSON (a response cut at its token limit leaves a fragment).
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"` // the call's tool name, which some APIs want back
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolDef offers a tool to the model: its name, what it does, and the JSON
// Schema of its arguments (an object schema).
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// Request is one turn's input.
type Request struct {
	// Model overrides the client's configured model when non-empty.
	Model string
	// System is the system prompt (instructions for the whole attempt).
	System   string
	Messages []Message
	Tools    []ToolDef
	// MaxOutputTokens bounds this turn's output; the provider stops there.
	MaxOutputTokens int64
}

// StopReason says why the model stopped.
type StopReason string

// Stop reasons, normalised across providers.
const (
	StopEndTurn   StopReason = "end_turn"   // the model is done
	StopToolUse   StopReason = "tool_use"   // it wants its tool calls run
	StopMaxTokens StopReason = "max_tokens" // cut at MaxOutputTokens
	StopRefusal   StopReason = "refusal"    // the model or the provider declined
	StopOther     StopReason = "other"      // anything else the provider said
)

// Response is one turn's output.
type Response struct {
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	StopReason StopReason `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
	// Model is the model that answered, as the provider names it.
	Model string `json:"model,omitempty"`
}

// Usage is what one turn cost, in tokens. InputTokens excludes the cached
// ones, which are counted apart as the providers report them.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// AllInput is every input token, cached or not: what an input budget counts.
func (u Usage) AllInput() int64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// Total is every token of the turn, in and out: what a token budget counts.
func (u Usage) Total() int64 { return u.AllInput() + u.OutputTokens }

// ClientOptions configure a provider's client. The providers read nothing
// from the environment: what is not here is not used.
type ClientOptions struct {
	// BaseURL is the API's address as the provider's official SDK takes
	// it (OpenAI's with /v1, Anthropic's without).
	BaseURL string
	// APIKey may be empty for servers that need none.
	APIKey string
	Model  string
	// HTTPClient carries every request; it must not time out a whole
	// response, which streams for as long as the model writes.
	HTTPClient *http.Client
}
