package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/drover-dev/drover/internal/native/model"
)

// Provider is this client's name in errors and health.
const Provider = "anthropic"

// Client speaks the Messages API.
type Client struct {
	opts   model.ClientOptions
	client sdk.Client
	now    func() time.Time
}

var _ model.Client = (*Client)(nil)

// New returns a client for the endpoint o names.
func New(o model.ClientOptions) *Client {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), // no ANTHROPIC_* variable of the worker's applies
		option.WithBaseURL(o.BaseURL),
		option.WithAPIKey(o.APIKey),
		option.WithMaxRetries(0), // the loop retries, within its budget
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Client{opts: o, client: sdk.NewClient(opts...), now: time.Now}
}

// Check asks for the configured model's entry: it costs no tokens, and it
// fails as a Turn would for a refused key or an unknown model.
func (c *Client) Check(ctx context.Context) (*model.Endpoint, error) {
	info, err := c.client.Models.Get(ctx, c.opts.Model, sdk.ModelGetParams{})
	if err != nil {
		return nil, c.classify(ctx, err)
	}
	return &model.Endpoint{Provider: Provider, BaseURL: c.opts.BaseURL, Model: info.ID, Detail: info.DisplayName}, nil
}

// Turn streams one response.
func (c *Client) Turn(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, &model.Error{Kind: model.KindRequest, Provider: Provider, Message: err.Error(), Err: err}
	}
	stream := c.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	acc := accumulator{}
	for stream.Next() {
		if err := acc.add(stream.Current()); err != nil {
			return nil, &model.Error{Kind: model.KindMalformed, Provider: Provider, Message: err.Error(), Err: err}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, c.classify(ctx, err)
	}
	if !acc.stopped {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The connection ended before message_stop: a cut stream.
		return nil, &model.Error{Kind: model.KindTransient, Provider: Provider, Message: "the stream ended before message_stop"}
	}
	return acc.response()
}

// params builds the request. The system prompt and the newest message are
// marked for prompt caching: an agent's conversation only grows, so each
// turn reads the previous turns from the cache.
func (c *Client) params(req *model.Request) (sdk.MessageNewParams, error) {
	name := req.Model
	if name == "" {
		name = c.opts.Model
	}
	p := sdk.MessageNewParams{Model: sdk.Model(name), MaxTokens: req.MaxOutputTokens}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	}
	for _, t := range req.Tools {
		var s struct {
			Properties json.RawMessage `json:"properties"`
			Required   []string        `json:"required"`
		}
		if err := json.Unmarshal(t.Schema, &s); err != nil {
			return p, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		tp := &sdk.ToolParam{Name: t.Name, Description: param.NewOpt(t.Description),
			InputSchema: sdk.ToolInputSchemaParam{Properties: s.Properties, Required: s.Required}}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	for i, m := range req.Messages {
		var blocks []sdk.ContentBlockParamUnion
		switch m.Role {
		case model.User:
			// Tool results must open the message that answers the calls.
			for _, r := range m.ToolResults {
				blocks = append(blocks, sdk.NewToolResultBlock(r.CallID, nonEmpty(r.Content), r.IsError))
			}
			if m.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
		case model.Assistant:
			if m.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, objectOrEmpty(tc.Input), tc.Name))
			}
		default:
			return p, fmt.Errorf("message with role %q", m.Role)
		}
		if len(blocks) == 0 {
			blocks = append(blocks, sdk.NewTextBlock("…")) // the API refuses an empty message
		}
		if i == len(req.Messages)-1 {
			last := &blocks[len(blocks)-1]
			switch {
			case last.OfText != nil:
				last.OfText.CacheControl = sdk.NewCacheControlEphemeralParam()
			case last.OfToolResult != nil:
				last.OfToolResult.CacheControl = sdk.NewCacheControlEphemeralParam()
			}
		}
		if m.Role == model.User {
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		}
	}
	return p, nil
}

// objectOrEmpty is a call's input as it must be sent back: a JSON object.
// A cut answer may have left a fragment, which the tool already refused.
func objectOrEmpty(in json.RawMessage) json.RawMessage {
	var v map[string]json.RawMessage
	if json.Unmarshal(in, &v) != nil {
		return json.RawMessage(`{}`)
	}
	return in
}

func nonEmpty(s string) string {
	if s == "" {
		return "(no output)"
	}
	return s
}

// accumulator folds the stream's events into one response.
type accumulator struct {
	model   string
	text    strings.Builder
	calls   []*call
	byIndex map[int64]*call
	stop    string
	usage   model.Usage
	stopped bool
}

type call struct {
	id, name string
	start    json.RawMessage // the input content_block_start carried
	partial  strings.Builder // input_json_delta fragments
	deltas   bool
}

func (a *accumulator) add(ev sdk.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		a.model = ev.Message.Model
		u := ev.Message.Usage
		a.usage = model.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			if a.byIndex == nil {
				a.byIndex = map[int64]*call{}
			}
			c := &call{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			if ev.ContentBlock.Input != nil {
				c.start, _ = json.Marshal(ev.ContentBlock.Input)
			}
			a.byIndex[ev.Index] = c
			a.calls = append(a.calls, c)
		} else if ev.ContentBlock.Type == "text" {
			a.text.WriteString(ev.ContentBlock.Text)
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			a.text.WriteString(ev.Delta.Text)
		case "input_json_delta":
			c := a.byIndex[ev.Index]
			if c == nil {
				return fmt.Errorf("input_json_delta for block %d, which is not a tool_use", ev.Index)
			}
			c.partial.WriteString(ev.Delta.PartialJSON)
			c.deltas = true
		}
	case "message_delta":
		a.stop = string(ev.Delta.StopReason)
		// Usage counts here are totals for the message so far.
		a.usage.OutputTokens = ev.Usage.OutputTokens
		if ev.Usage.JSON.InputTokens.Valid() && ev.Usage.InputTokens > 0 {
			a.usage.InputTokens = ev.Usage.InputTokens
		}
		if ev.Usage.JSON.CacheReadInputTokens.Valid() && ev.Usage.CacheReadInputTokens > 0 {
			a.usage.CacheReadTokens = ev.Usage.CacheReadInputTokens
		}
		if ev.Usage.JSON.CacheCreationInputTokens.Valid() && ev.Usage.CacheCreationInputTokens > 0 {
			a.usage.CacheWriteTokens = ev.Usage.CacheCreationInputTokens
		}
	case "message_stop":
		a.stopped = true
	}
	return nil
}

func (a *accumulator) response() (*model.Response, error) {
	r := &model.Response{Text: a.text.String(), Usage: a.usage, Model: a.model, StopReason: stopReason(a.stop)}
	for _, c := range a.calls {
		in := c.start
		if c.deltas {
			in = json.RawMessage(c.partial.String())
		}
		if len(in) == 0 {
			in = json.RawMessage(`{}`)
		}
		r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: c.id, Name: c.name, Input: in})
	}
	return r, nil
}

func stopReason(s string) model.StopReason {
	switch s {
	case "end_turn", "stop_sequence":
		return model.StopEndTurn
	case "tool_use":
		return model.StopToolUse
	case "max_tokens":
		return model.StopMaxTokens
	case "refusal":
		return model.StopRefusal
	}
	return model.StopOther
}

// errorKinds are Anthropic's error types, which a stream's error event
// carries without a telling HTTP status.
var errorKinds = map[string]model.Kind{
	"overloaded_error":      model.KindTransient,
	"api_error":             model.KindTransient,
	"timeout_error":         model.KindTransient,
	"rate_limit_error":      model.KindRateLimited,
	"authentication_error":  model.KindAuth,
	"permission_error":      model.KindAuth,
	"billing_error":         model.KindAuth,
	"invalid_request_error": model.KindRequest,
	"not_found_error":       model.KindRequest,
	"request_too_large":     model.KindRequest,
}

// classify turns an SDK error into a model.Error, or the context's error
// when the caller cancelled.
func (c *Client) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae *sdk.Error
	if errors.As(err, &ae) {
		me := &model.Error{Provider: Provider, Status: ae.StatusCode, Type: string(ae.Type()), Message: ae.Message, Err: err}
		if me.Message == "" {
			me.Message = strings.TrimSpace(ae.RawJSON())
		}
		kind, known := errorKinds[me.Type]
		switch {
		case ae.StatusCode >= 400:
			me.Kind = model.KindOfStatus(ae.StatusCode)
			if known && me.Kind == model.KindRequest {
				me.Kind = kind // e.g. a 400 that says overloaded
			}
		case known:
			me.Kind, me.Status = kind, 0 // an error event inside a 200 stream
		default:
			me.Kind, me.Status = model.KindTransient, 0
		}
		if ae.Response != nil {
			me.RetryAfter, me.ResetAt = model.RetryAfterOf(ae.Response.Header, c.now())
		}
		return me
	}
	return transportError(Provider, err)
}

// transportError classifies what failed below the API: the network and
// the stream's framing.
func transportError(provider string, err error) *model.Error {
	me := &model.Error{Provider: provider, Message: err.Error(), Err: err}
	var se *json.SyntaxError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		me.Kind = model.KindMalformed
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &ne):
		me.Kind = model.KindTransient
	default:
		me.Kind = model.KindTransient
	}
	return me
}
