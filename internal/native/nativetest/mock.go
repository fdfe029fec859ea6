package nativetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
)

// Step is one scripted model call: a Response, an Err, or Do, which runs
// in the call's place (to block until cancelled, move a clock, look at the
// request).
type Step struct {
	Response *model.Response
	Err      *model.Error
	Do       func(ctx context.Context, req *model.Request) (*model.Response, error)
}

// MockModelClient answers Turns from a script, in order, and records the
// requests. It is safe for concurrent use.
type MockModelClient struct {
	mu       sync.Mutex
	steps    []Step
	requests []*model.Request
	// CheckErr is what Check returns; nil answers healthy.
	CheckErr error
}

var _ model.Client = (*MockModelClient)(nil)

// NewMock returns a client that answers with steps.
func NewMock(steps ...Step) *MockModelClient { return &MockModelClient{steps: steps} }

// Replay returns a client that answers as the recorded attempt's model
// did, call for call, errors included.
func Replay(rec *native.Recording) *MockModelClient {
	m := &MockModelClient{}
	for _, c := range rec.Calls {
		if c.Err != nil {
			e := *c.Err
			m.steps = append(m.steps, Step{Err: &e})
			continue
		}
		r := *c.Response
		r.ToolCalls = slices.Clone(r.ToolCalls)
		m.steps = append(m.steps, Step{Response: &r})
	}
	return m
}

// Push appends steps to the script.
func (m *MockModelClient) Push(steps ...Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, steps...)
}

// Turn implements model.Client.
func (m *MockModelClient) Turn(ctx context.Context, req *model.Request) (*model.Response, error) {
	m.mu.Lock()
	cp := *req
	cp.Messages = slices.Clone(req.Messages)
	m.requests = append(m.requests, &cp)
	n := len(m.requests)
	if len(m.steps) == 0 {
		m.mu.Unlock()
		return nil, &model.Error{Kind: model.KindRequest, Provider: "mock", Message: fmt.Sprintf("the script has no step for call %d", n)}
	}
	s := m.steps[0]
	m.steps = m.steps[1:]
	m.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch {
	case s.Do != nil:
		return s.Do(ctx, req)
	case s.Err != nil:
		return nil, s.Err
	}
	r := *s.Response
	r.ToolCalls = slices.Clone(r.ToolCalls)
	return &r, nil
}

// Check implements model.Client.
func (m *MockModelClient) Check(context.Context) (*model.Endpoint, error) {
	if m.CheckErr != nil {
		return nil, m.CheckErr
	}
	return &model.Endpoint{Provider: "mock", Model: "mock-model"}, nil
}

// Requests are the requests received, in order.
func (m *MockModelClient) Requests() []*model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Left is how many steps were not used.
func (m *MockModelClient) Left() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.steps)
}

// Text is a step answering with text only (the model is done).
func Text(s string, u model.Usage) Step {
	return Step{Response: &model.Response{Text: s, StopReason: model.StopEndTurn, Usage: u, Model: "mock-model"}}
}

// Calls is a step answering with tool calls.
func Calls(u model.Usage, calls ...model.ToolCall) Step {
	return Step{Response: &model.Response{ToolCalls: calls, StopReason: model.StopToolUse, Usage: u, Model: "mock-model"}}
}

// Call builds a tool call; args is marshalled as its input.
func Call(id, name string, args any) model.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return model.ToolCall{ID: id, Name: name, Input: b}
}

// Fail is a step that fails with e.
func Fail(e *model.Error) Step { return Step{Err: e} }
