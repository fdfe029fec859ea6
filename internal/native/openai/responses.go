package openai

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/drover-dev/drover/internal/native/model"
)

// Responses speaks the Responses API, statelessly: every turn sends the
// whole conversation with store=false, so nothing of an attempt is kept by
// the provider and a retry needs no server-side state.
type Responses struct {
	opts   model.ClientOptions
	svc    responses.ResponseService
	models sdk.ModelService
	now    func() time.Time
}

var _ model.Client = (*Responses)(nil)

// NewResponses returns a client for the endpoint o names.
func NewResponses(o model.ClientOptions) *Responses {
	opts := requestOptions(o)
	return &Responses{opts: o, svc: responses.NewResponseService(opts...), models: sdk.NewModelService(opts...), now: time.Now}
}

// Check retrieves the configured model: no tokens are spent.
func (c *Responses) Check(ctx context.Context) (*model.Endpoint, error) {
	m, err := c.models.Get(ctx, c.opts.Model)
	if err != nil {
		return nil, classify(ctx, ProviderResponses, err, c.now())
	}
	return &model.Endpoint{Provider: ProviderResponses, BaseURL: c.opts.BaseURL, Model: m.ID, Detail: "owned by " + m.OwnedBy}, nil
}

// Turn streams one response.
func (c *Responses) Turn(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, &model.Error{Kind: model.KindRequest, Provider: ProviderResponses, Message: err.Error(), Err: err}
	}
	stream := c.svc.NewStreaming(ctx, params)
	defer stream.Close()
	acc := responsesAcc{}
	for stream.Next() {
		if me := acc.add(stream.Current()); me != nil {
			return nil, me
		}
	}
	if err := stream.Err(); err != nil {
		return nil, classify(ctx, ProviderResponses, err, c.now())
	}
	if !acc.done {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &model.Error{Kind: model.KindTransient, Provider: ProviderResponses, Message: "the stream ended before response.completed"}
	}
	return acc.resp, nil
}

func (c *Responses) params(req *model.Request) (responses.ResponseNewParams, error) {
	name := req.Model
	if name == "" {
		name = c.opts.Model
	}
	p := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(name),
		MaxOutputTokens: param.NewOpt(req.MaxOutputTokens),
		Store:           param.NewOpt(false),
	}
	if req.System != "" {
		p.Instructions = param.NewOpt(req.System)
	}
	for _, t := range req.Tools {
		schema, err := schemaMap(t.Name, t.Schema)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: schema, Strict: param.NewOpt(false),
		}})
	}
	var items responses.ResponseInputParam
	for _, m := range req.Messages {
		switch m.Role {
		case model.User:
			for _, r := range m.ToolResults {
				out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(r.CallID)}
				out.Output.OfString = param.NewOpt(r.Content)
				items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out})
			}
			if m.Text != "" {
				items = append(items, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleUser))
			}
		case model.Assistant:
			if m.Text != "" {
				items = append(items, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleAssistant))
			}
			for _, tc := range m.ToolCalls {
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(objectOrEmpty(tc.Input), tc.ID, tc.Name))
			}
		default:
			return p, fmt.Errorf("message with role %q", m.Role)
		}
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	return p, nil
}

// responsesAcc folds the stream's events into one response. Output items
// are taken whole from response.output_item.done; the terminal event
// (completed, incomplete) brings usage and the final status.
type responsesAcc struct {
	text    strings.Builder
	calls   []model.ToolCall
	refused bool
	resp    *model.Response
	done    bool
}

func (a *responsesAcc) add(ev responses.ResponseStreamEventUnion) *model.Error {
	switch ev.Type {
	case "response.output_item.done":
		a.item(ev.Item)
	case "response.completed", "response.incomplete":
		r := ev.Response
		if len(a.calls) == 0 && a.text.Len() == 0 {
			for _, it := range r.Output {
				a.item(it)
			}
		}
		a.resp = &model.Response{Text: a.text.String(), ToolCalls: a.calls, Model: string(r.Model), Usage: responsesUsage(r.Usage)}
		switch {
		case ev.Type == "response.incomplete" && r.IncompleteDetails.Reason == "max_output_tokens":
			a.resp.StopReason = model.StopMaxTokens
		case ev.Type == "response.incomplete" && r.IncompleteDetails.Reason == "content_filter", a.refused:
			a.resp.StopReason = model.StopRefusal
		case ev.Type == "response.incomplete":
			a.resp.StopReason = model.StopOther
		case len(a.calls) > 0:
			a.resp.StopReason = model.StopToolUse
		default:
			a.resp.StopReason = model.StopEndTurn
		}
		a.done = true
	case "response.failed":
		e := ev.Response.Error
		me := &model.Error{Provider: ProviderResponses, Kind: model.KindTransient, Type: string(e.Code), Message: e.Message}
		if k, ok := codeKinds[string(e.Code)]; ok {
			me.Kind = k
		}
		return me
	case "error":
		me := &model.Error{Provider: ProviderResponses, Kind: model.KindTransient, Type: ev.Code, Message: ev.Message}
		if k, ok := codeKinds[ev.Code]; ok {
			me.Kind = k
		}
		return me
	}
	return nil
}

func (a *responsesAcc) item(it responses.ResponseOutputItemUnion) {
	switch it.Type {
	case "message":
		for _, c := range it.Content {
			switch c.Type {
			case "output_text":
				a.text.WriteString(c.Text)
			case "refusal":
				a.text.WriteString(c.Refusal)
				a.refused = true
			}
		}
	case "function_call":
		a.calls = append(a.calls, model.ToolCall{ID: it.CallID, Name: it.Name, Input: []byte(it.Arguments.OfString)})
	}
}

// responsesUsage maps usage: OpenAI counts cached tokens inside
// input_tokens, Drover apart.
func responsesUsage(u responses.ResponseUsage) model.Usage {
	cached, written := u.InputTokensDetails.CachedTokens, u.InputTokensDetails.CacheWriteTokens
	return model.Usage{InputTokens: max(u.InputTokens-cached-written, 0), OutputTokens: u.OutputTokens, CacheReadTokens: cached, CacheWriteTokens: written}
}
