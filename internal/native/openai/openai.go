package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/drover-dev/drover/internal/native/model"
)

// Provider names, as configured.
const (
	ProviderResponses = "openai-responses"
	ProviderChat      = "openai-chat"
)

// requestOptions are every service's options: exactly what o says.
func requestOptions(o model.ClientOptions) []option.RequestOption {
	opts := []option.RequestOption{option.WithBaseURL(o.BaseURL), option.WithMaxRetries(0)}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return opts
}

// schemaMap decodes a tool's JSON Schema for the SDK's map-typed fields.
func schemaMap(name string, schema json.RawMessage) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	return m, nil
}

// objectOrEmpty is a call's arguments as they must be sent back: a JSON
// object. A cut answer may have left a fragment, which the tool refused.
func objectOrEmpty(in json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(in, &v) != nil {
		return "{}"
	}
	return string(in)
}

// codeKinds classifies the error codes OpenAI-style APIs put in a body or
// a stream's error event when the HTTP status says nothing.
var codeKinds = map[string]model.Kind{
	"rate_limit_exceeded":     model.KindRateLimited,
	"insufficient_quota":      model.KindRateLimited,
	"server_error":            model.KindTransient,
	"server_is_overloaded":    model.KindTransient,
	"slow_down":               model.KindTransient,
	"invalid_api_key":         model.KindAuth,
	"unauthorized":            model.KindAuth,
	"invalid_prompt":          model.KindRequest,
	"context_length_exceeded": model.KindRequest,
	"model_not_found":         model.KindRequest,
}

// classify turns an SDK error into a model.Error, or the context's error
// when the caller cancelled.
func classify(ctx context.Context, provider string, err error, now time.Time) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae *sdk.Error
	if errors.As(err, &ae) {
		me := &model.Error{Provider: provider, Status: ae.StatusCode, Type: firstOf(ae.Code, ae.Type), Message: ae.Message, Err: err}
		if me.Message == "" {
			me.Message = strings.TrimSpace(ae.RawJSON())
		}
		me.Kind = model.KindOfStatus(ae.StatusCode)
		if k, ok := codeKinds[ae.Code]; ok && me.Kind == model.KindRequest {
			me.Kind = k
		}
		if ae.Response != nil {
			me.RetryAfter, me.ResetAt = model.RetryAfterOf(ae.Response.Header, now)
		}
		return me
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return streamError(provider, se)
	}
	return transportError(provider, err)
}

// streamError classifies an error object sent inside a stream, as
// OpenRouter and LiteLLM do: {"error": {"code": 429 | "server_error", ...}}.
func streamError(provider string, se *ssestream.StreamError) *model.Error {
	me := &model.Error{Provider: provider, Kind: model.KindTransient, Message: se.Message, Err: se}
	var body struct {
		Error struct {
			Code    json.RawMessage `json:"code"`
			Type    string          `json:"type"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(se.Event.Data, &body) != nil {
		return me
	}
	if body.Error.Message != "" {
		me.Message = body.Error.Message
	}
	code := strings.Trim(string(body.Error.Code), `"`)
	me.Type = firstOf(code, body.Error.Type)
	if n, err := strconv.Atoi(code); err == nil && n >= 400 {
		me.Status, me.Kind = n, model.KindOfStatus(n)
	} else if k, ok := codeKinds[code]; ok {
		me.Kind = k
	} else if k, ok := codeKinds[body.Error.Type]; ok {
		me.Kind = k
	}
	return me
}

// transportError classifies what failed below the API: the network and
// the stream's framing.
func transportError(provider string, err error) *model.Error {
	me := &model.Error{Provider: provider, Kind: model.KindTransient, Message: err.Error(), Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se), errors.As(err, &te):
		me.Kind = model.KindMalformed
	case errors.Is(err, io.ErrUnexpectedEOF):
		me.Message = "the stream was cut: " + err.Error()
	}
	return me
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
