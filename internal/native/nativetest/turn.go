package nativetest

import (
	"github.com/drover-dev/drover/internal/native/model"
)

// turnOf reads a model request's JSON body, in provider's wire format, as
// a Turn. What it does not find stays zero: a request it cannot read is
// the first turn of an empty task, which Directed answers "Done.".
func turnOf(provider string, body map[string]any) *Turn {
	t := &Turn{N: 1, Model: str(body["model"])}
	switch provider {
	case "anthropic":
		anthropicTurn(t, body)
	case "openai-responses":
		responsesTurn(t, body)
	case "openai-chat":
		chatTurn(t, body)
	}
	return t
}

// anthropicTurn: messages alternate user and assistant; the content is a
// string or blocks (text, tool_use, tool_result).
func anthropicTurn(t *Turn, body map[string]any) {
	msgs := list(body["messages"])
	for i, m := range msgs {
		mm := obj(m)
		var results []model.ToolResult
		text := str(mm["content"])
		for _, b := range list(mm["content"]) {
			bb := obj(b)
			switch str(bb["type"]) {
			case "text":
				text += str(bb["text"])
			case "tool_result":
				results = append(results, model.ToolResult{CallID: str(bb["tool_use_id"]), Content: blockText(bb["content"]), IsError: bb["is_error"] == true})
			}
		}
		switch str(mm["role"]) {
		case "assistant":
			t.N++
		case "user":
			if t.Prompt == "" && text != "" {
				t.Prompt = text
			}
			if i == len(msgs)-1 {
				t.Results = results
			}
		}
	}
}

// blockText is a tool_result's content: a string or text blocks.
func blockText(v any) string {
	s := str(v)
	for _, b := range list(v) {
		s += str(obj(b)["text"])
	}
	return s
}

// responsesTurn: the input is a list of items — messages, function_call
// and function_call_output. One answer is a run of assistant items (a
// message and its calls).
func responsesTurn(t *Turn, body map[string]any) {
	if s := str(body["input"]); s != "" {
		t.Prompt = s
		return
	}
	inAnswer := false
	for _, it := range list(body["input"]) {
		item := obj(it)
		typ, role := str(item["type"]), str(item["role"])
		switch {
		case typ == "function_call" || role == "assistant":
			if !inAnswer {
				t.N++
				t.Results = nil
			}
			inAnswer = true
			continue
		case typ == "function_call_output":
			t.Results = append(t.Results, model.ToolResult{CallID: str(item["call_id"]), Content: str(item["output"])})
		case role == "user" && t.Prompt == "":
			t.Prompt = str(item["content"])
			for _, c := range list(item["content"]) {
				t.Prompt += str(obj(c)["text"])
			}
		}
		inAnswer = false
	}
}

// chatTurn: messages with roles system, user, assistant and tool; a tool
// message answers one call.
func chatTurn(t *Turn, body map[string]any) {
	for _, m := range list(body["messages"]) {
		mm := obj(m)
		switch str(mm["role"]) {
		case "assistant":
			t.N++
			t.Results = nil
		case "tool":
			t.Results = append(t.Results, model.ToolResult{CallID: str(mm["tool_call_id"]), Content: blockText(mm["content"])})
		case "user":
			if t.Prompt == "" {
				t.Prompt = blockText(mm["content"])
			}
		}
	}
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
