package openai

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/drover-dev/drover/internal/native/model"
)

// Chat speaks Chat Completions, the API most OpenAI-compatible servers
// implement. It sends max_tokens (not max_completion_tokens), which they
// all read, and asks for usage in the stream's last chunk.
type Chat struct {
	opts   model.ClientOptions
	svc    sdk.ChatCompletionService
	models sdk.ModelService
	now    func() time.Time
}

var _ model.Client = (*Chat)(nil)

// NewChat returns a client for the endpoint o names.
func NewChat(o model.ClientOptions) *Chat {
	opts := requestOptions(o)
	return &Chat{opts: o, svc: sdk.NewChatCompletionService(opts...), models: sdk.NewModelService(opts...), now: time.Now}
}

// Check lists the endpoint's models, which every compatible server serves
// (retrieving one is not universal), and looks for the configured one. A
// model the list lacks is reported in Detail rather than failed: routers
// such as LiteLLM may serve more than they list.
func (c *Chat) Check(ctx context.Context) (*model.Endpoint, error) {
	page, err := c.models.List(ctx)
	if err != nil {
		return nil, classify(ctx, ProviderChat, err, c.now())
	}
	ep := &model.Endpoint{Provider: ProviderChat, BaseURL: c.opts.BaseURL, Model: c.opts.Model, Detail: "not in the endpoint's model list"}
	for _, m := range page.Data {
		if m.ID == c.opts.Model {
			ep.Detail = "listed"
			break
		}
	}
	return ep, nil
}

// Turn streams one completion.
func (c *Chat) Turn(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, &model.Error{Kind: model.KindRequest, Provider: ProviderChat, Message: err.Error(), Err: err}
	}
	stream := c.svc.NewStreaming(ctx, params)
	defer stream.Close()
	acc := chatAcc{calls: map[int64]*chatCall{}}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, classify(ctx, ProviderChat, err, c.now())
	}
	if acc.finish == "" {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &model.Error{Kind: model.KindTransient, Provider: ProviderChat, Message: "the stream ended without a finish_reason"}
	}
	return acc.response(), nil
}

func (c *Chat) params(req *model.Request) (sdk.ChatCompletionNewParams, error) {
	name := req.Model
	if name == "" {
		name = c.opts.Model
	}
	p := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(name),
		MaxTokens:     param.NewOpt(req.MaxOutputTokens),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	for _, t := range req.Tools {
		schema, err := schemaMap(t.Name, t.Schema)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: shared.FunctionParameters(schema),
		}))
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case model.User:
			for _, r := range m.ToolResults {
				p.Messages = append(p.Messages, sdk.ToolMessage(r.Content, r.CallID))
			}
			if m.Text != "" {
				p.Messages = append(p.Messages, sdk.UserMessage(m.Text))
			}
		case model.Assistant:
			a := &sdk.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = param.NewOpt(m.Text)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID, Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: objectOrEmpty(tc.Input)},
				}})
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
		default:
			return p, fmt.Errorf("message with role %q", m.Role)
		}
	}
	return p, nil
}

// chatAcc folds chunks into one response. Tool calls arrive in pieces,
// keyed by index: the first piece has the id and name, all of them add
// to the arguments.
type chatAcc struct {
	text   strings.Builder
	calls  map[int64]*chatCall
	finish string
	usage  model.Usage
	model  string
}

type chatCall struct {
	id, name string
	args     strings.Builder
}

func (a *chatAcc) add(ch sdk.ChatCompletionChunk) {
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.JSON.Usage.Valid() && (ch.Usage.PromptTokens > 0 || ch.Usage.CompletionTokens > 0) {
		cached, written := ch.Usage.PromptTokensDetails.CachedTokens, ch.Usage.PromptTokensDetails.CacheWriteTokens
		a.usage = model.Usage{InputTokens: max(ch.Usage.PromptTokens-cached-written, 0), OutputTokens: ch.Usage.CompletionTokens,
			CacheReadTokens: cached, CacheWriteTokens: written}
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue // n is 1: other choices are not asked for
		}
		a.text.WriteString(choice.Delta.Content)
		for _, tc := range choice.Delta.ToolCalls {
			c := a.calls[tc.Index]
			if c == nil {
				c = &chatCall{}
				a.calls[tc.Index] = c
			}
			if tc.ID != "" {
				c.id = tc.ID
			}
			if tc.Function.Name != "" {
				c.name = tc.Function.Name
			}
			c.args.WriteString(tc.Function.Arguments)
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
}

func (a *chatAcc) response() *model.Response {
	r := &model.Response{Text: a.text.String(), Usage: a.usage, Model: a.model}
	idx := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, i := range idx {
		c := a.calls[i]
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: c.id, Name: c.name, Input: []byte(args)})
	}
	switch a.finish {
	case "stop":
		r.StopReason = model.StopEndTurn
	case "tool_calls", "function_call":
		r.StopReason = model.StopToolUse
	case "length":
		r.StopReason = model.StopMaxTokens
	case "content_filter":
		r.StopReason = model.StopRefusal
	default:
		r.StopReason = model.StopOther
	}
	return r
}
