package nativetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/native/model"
)

// Turn is a request as a stateless scripted model reads it, whatever the
// wire it came on: the task (the first user message), which answer is
// asked for (N, 1 for the first: the model's answers so far plus one),
// and the results of the previous answer's tool calls.
type Turn struct {
	Prompt  string
	N       int
	Model   string
	Results []model.ToolResult
}

// Directed answers a turn by the directives in its prompt: lines starting
// with '@', as the demo agent reads them (docs/demo-agent.md). It keeps no
// state, so that retries, concurrent attempts and a fallback runtime all
// get the same answer for the same conversation. Each step directive is one
// answer, in order; after the last, the model answers with text and no
// tool call, which ends the attempt.
//
//	@write PATH TEXT   write_file PATH with TEXT and a newline (\n in TEXT is a newline)
//	@read PATH         read_file PATH
//	@list [PATH]       list_dir PATH (the worktree when none)
//	@bash COMMAND      bash COMMAND
//	@call TOOL JSON    any tool, with JSON as its input (a made-up tool, a bad input)
//	@fail STATUS [S]   answer HTTP STATUS (429, 401, 500, …), with Retry-After: S
//	@hang              answer nothing until the client goes away
//	@loop              list_dir, on this answer and every one after it
//	@usage IN OUT      every answer reports IN input and OUT output tokens (not a step)
//	@say TEXT          the last answer's text (not a step); defaults to "Done."
//
// A line it cannot read is answered with a 400, so that a test's typo
// fails the test rather than passing by accident.
func Directed(t *Turn) Reply {
	steps, rep, err := parseDirectives(t.Prompt)
	if err != nil {
		return Reply{Status: http.StatusBadRequest, ErrorType: "invalid_request_error", ErrorMessage: "nativetest: " + err.Error()}
	}
	i := t.N - 1
	for j, s := range steps {
		if s.loop && i > j {
			i = j // a loop answers the same from there on
		}
	}
	if i >= len(steps) {
		return rep
	}
	s := steps[i]
	if s.call == nil {
		r := s.reply
		r.Usage = rep.Usage
		return r
	}
	call := *s.call
	call.ID = fmt.Sprintf("call_%d", t.N)
	return Reply{Text: fmt.Sprintf("Step %d.", t.N), ToolCalls: []model.ToolCall{call}, Usage: rep.Usage}
}

// step is one answer of a script: a tool call, or a reply (a failure).
type step struct {
	call  *model.ToolCall
	reply Reply
	loop  bool
}

// parseDirectives reads a prompt's directives into its steps and its last
// answer.
func parseDirectives(prompt string) ([]step, Reply, error) {
	final := Reply{Text: "Done.", Usage: model.Usage{InputTokens: 100, OutputTokens: 10}}
	var steps []step
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "@") {
			continue
		}
		name, rest, _ := strings.Cut(line[1:], " ")
		rest = strings.TrimSpace(rest)
		s, err := directive(name, rest, &final)
		if err != nil {
			return nil, Reply{}, fmt.Errorf("%q: %w", line, err)
		}
		if s != nil {
			steps = append(steps, *s)
		}
	}
	return steps, final, nil
}

// directive reads one directive: a step, or nil for a setting of final.
func directive(name, rest string, final *Reply) (*step, error) {
	arg1, arg2, _ := strings.Cut(rest, " ")
	call := func(tool string, input map[string]any) (*step, error) {
		b, _ := json.Marshal(input)
		return &step{call: &model.ToolCall{Name: tool, Input: b}}, nil
	}
	switch name {
	case "write":
		if arg1 == "" {
			return nil, fmt.Errorf("@write PATH TEXT")
		}
		return call("write_file", map[string]any{"path": arg1, "content": strings.ReplaceAll(arg2, `\n`, "\n") + "\n"})
	case "read":
		return call("read_file", map[string]any{"path": rest})
	case "list":
		return call("list_dir", map[string]any{"path": rest})
	case "bash":
		return call("bash", map[string]any{"command": rest})
	case "call":
		if !json.Valid([]byte(arg2)) {
			return nil, fmt.Errorf("@call TOOL JSON: the input is not JSON")
		}
		return &step{call: &model.ToolCall{Name: arg1, Input: json.RawMessage(arg2)}}, nil
	case "fail":
		status, err := strconv.Atoi(arg1)
		if err != nil || status < 400 || status > 599 {
			return nil, fmt.Errorf("@fail STATUS [SECONDS]: status 400..599")
		}
		r := Reply{Status: status, ErrorType: errorType(status), ErrorMessage: fmt.Sprintf("scripted %d", status)}
		if arg2 != "" {
			if _, err := strconv.Atoi(arg2); err != nil {
				return nil, fmt.Errorf("@fail STATUS SECONDS: seconds is a number")
			}
			r.Header = http.Header{"Retry-After": {arg2}}
		}
		return &step{reply: r}, nil
	case "hang":
		return &step{reply: Reply{Hang: true}}, nil
	case "loop":
		s, _ := call("list_dir", map[string]any{})
		s.loop = true
		return s, nil
	case "usage":
		in, err1 := strconv.ParseInt(arg1, 10, 64)
		out, err2 := strconv.ParseInt(arg2, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("@usage IN OUT")
		}
		final.Usage = model.Usage{InputTokens: in, OutputTokens: out}
		return nil, nil
	case "say":
		final.Text = strings.ReplaceAll(rest, `\n`, "\n")
		return nil, nil
	}
	return nil, fmt.Errorf("unknown directive @%s", name)
}

// errorType is the error type a provider would name a status with.
func errorType(status int) string {
	switch {
	case status == 429:
		return "rate_limit_error"
	case status == 401 || status == 403:
		return "authentication_error"
	case status >= 500:
		return "overloaded_error"
	}
	return "invalid_request_error"
}

// DirectedClient is a model.Client that answers as Directed does, without
// a server: the in-process form of the scripted model, safe for
// concurrent use.
type DirectedClient struct{}

var _ model.Client = DirectedClient{}

// Turn implements model.Client.
func (DirectedClient) Turn(ctx context.Context, req *model.Request) (*model.Response, error) {
	rep := Directed(TurnOf(req))
	switch {
	case rep.Hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case rep.Status != 0:
		e := &model.Error{Kind: model.KindOfStatus(rep.Status), Provider: "directed", Status: rep.Status, Type: rep.ErrorType, Message: rep.ErrorMessage}
		if s, err := strconv.Atoi(rep.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, e
	}
	return &model.Response{Text: rep.Text, ToolCalls: rep.ToolCalls, StopReason: stopOf(rep), Usage: rep.Usage, Model: "directed-model"}, nil
}

// Check implements model.Client.
func (DirectedClient) Check(context.Context) (*model.Endpoint, error) {
	return &model.Endpoint{Provider: "directed", Model: "directed-model"}, nil
}

// TurnOf reads a provider-agnostic request as a Turn.
func TurnOf(req *model.Request) *Turn {
	t := &Turn{N: 1, Model: req.Model}
	for i, m := range req.Messages {
		switch {
		case m.Role == model.User && t.Prompt == "" && m.Text != "":
			t.Prompt = m.Text
		case m.Role == model.Assistant:
			t.N++
		}
		if i == len(req.Messages)-1 && m.Role == model.User {
			t.Results = m.ToolResults
		}
	}
	return t
}
