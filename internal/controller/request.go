package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

// Every API request is outside input: any client of the operator role (and,
// without authentication, anyone who reaches NATS) can send any bytes on
// drover.api.*. Each is decoded here before it is looked at, with the rules
// the CLI applies before sending: one JSON object of known members, none
// twice, each of its type, within a size limit; ids through drovertype's
// parsers; a flow through flow.DecodeJSON, which is Parse's validation of
// the wire form. The Client runs the same checks before it sends, so a
// command fails fast, and the controller's answer to another client is the
// same words.

// maxRequestSize bounds every request but those that carry a flow.
const maxRequestSize = 64 << 10

// maxSpecRequestSize bounds a request carrying a flow: the flow's wire form
// and a little for the members around it.
const maxSpecRequestSize = flow.MaxJSONSize + 4<<10

// maxReason bounds an operator's reason, recorded in an event.
const maxReason = 1000

// requestError is a request refused for its form; the API answers it with
// CodeBadRequest.
type requestError struct {
	msg string
	// problems are a flow's, by field, for the client to place in its
	// file (flow.Locate); the answer carries them in ProblemsHeader.
	problems []*flow.Error
}

// flowRefused is the refusal of a flow that does not validate.
func flowRefused(err error) *requestError {
	re := &requestError{msg: err.Error()}
	if ve := (*flow.ValidationError)(nil); errors.As(err, &ve) {
		re.problems = ve.Errors
	}
	return re
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// members reads body as one JSON object whose members are among known,
// each at most once, and returns their raw values. A body that is empty or
// only whitespace is an object without members.
func members(what string, body []byte, limit int, known ...string) (map[string]jsontext.Value, error) {
	if len(body) > limit {
		return nil, badRequest("%s request: %d bytes; the limit is %d", what, len(body), limit)
	}
	out := map[string]jsontext.Value{}
	if len(bytes.TrimSpace(body)) == 0 {
		return out, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	syntax := func(err error) error {
		return badRequest("%s request: invalid JSON: %s", what, strings.TrimPrefix(err.Error(), "jsontext: "))
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, syntax(err)
	}
	if tok.Kind() != '{' {
		return nil, badRequest("%s request: must be a JSON object, got %s", what, flow.JSONKindName(tok.Kind()))
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, syntax(err)
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, syntax(err)
		}
		switch {
		case len(known) == 0:
			return nil, badRequest("%s request: %.40q: unknown field (the request has no fields)", what, name)
		case !slices.Contains(known, name):
			return nil, badRequest("%s request: %.40q: unknown field (known fields: %s)", what, name, strings.Join(known, ", "))
		case out[name] != nil:
			return nil, badRequest("%s request: %s: field is set twice", what, name)
		}
		out[name] = v.Clone() // v is the decoder's buffer
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, syntax(err)
	}
	switch _, err := dec.ReadToken(); {
	case err == nil:
		return nil, badRequest("%s request: invalid JSON: more after the request's object", what)
	case !errors.Is(err, io.EOF):
		return nil, syntax(err)
	}
	return out, nil
}

// stringMember returns member name of m as a string, "" when absent or null.
func stringMember(what string, m map[string]jsontext.Value, name string) (string, error) {
	v, ok := m[name]
	if !ok {
		return "", nil
	}
	switch v.Kind() {
	case 'n':
		return "", nil
	case '"':
		tok, err := jsontext.NewDecoder(bytes.NewReader(v)).ReadToken()
		if err != nil {
			return "", badRequest("%s request: %s: %v", what, name, err)
		}
		return tok.String(), nil
	}
	return "", badRequest("%s request: %s: must be a string, got %s", what, name, flow.JSONKindName(v.Kind()))
}

// checkReason refuses a reason the event log should not carry: too long,
// not text, or with control characters (a reason is one line, shown to
// operators).
func checkReason(what, reason string) error {
	switch {
	case len(reason) > maxReason:
		return badRequest("%s request: reason: %d bytes; the limit is %d", what, len(reason), maxReason)
	case !utf8.ValidString(reason):
		return badRequest("%s request: reason: not valid UTF-8", what)
	case strings.IndexFunc(reason, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0:
		return badRequest("%s request: reason: contains control characters; write one line of text", what)
	}
	return nil
}

// decodeSubmit reads a submit request: {"spec": FLOW, "strict": BOOL}, the
// flow decoded and validated by flow.DecodeJSON with opts. Its problems are
// the flow's, one per line, as the CLI prints them for a file.
func decodeSubmit(body []byte, opts flow.Options) (*flow.Spec, bool, error) {
	m, err := members("submit", body, maxSpecRequestSize, "spec", "strict")
	if err != nil {
		return nil, false, err
	}
	strict, err := boolMember("submit", m, "strict")
	if err != nil {
		return nil, false, err
	}
	raw, ok := m["spec"]
	if !ok {
		return nil, false, badRequest("submit request: spec: required: the flow to submit")
	}
	spec, err := flow.DecodeJSON(raw, opts)
	if err != nil {
		return nil, false, flowRefused(err)
	}
	return spec, strict, nil
}

// boolMember returns member name of m as a bool, false when absent or null.
func boolMember(what string, m map[string]jsontext.Value, name string) (bool, error) {
	switch v, ok := m[name]; {
	case !ok || v.Kind() == 'n':
		return false, nil
	case v.Kind() == 't' || v.Kind() == 'f':
		return v.Kind() == 't', nil
	default:
		return false, badRequest("%s request: %s: must be true or false, got %s", what, name, flow.JSONKindName(v.Kind()))
	}
}

// check is what the Client and the controller check of a status request.
func (r StatusRequest) check() error {
	if r.Flow != "" {
		if err := drovertype.ValidID(r.Flow); err != nil {
			return badRequest("status request: flow: %v", err)
		}
	}
	return r.checkPage()
}

func decodeStatus(body []byte) (StatusRequest, error) {
	var r StatusRequest
	m, err := members("status", body, maxRequestSize, "flow", "limit", "after", "states", "tasks")
	if err == nil {
		r.Flow, err = stringMember("status", m, "flow")
	}
	if err == nil {
		err = decodePage(m, &r)
	}
	if err == nil {
		err = r.check()
	}
	return r, err
}

// decodeRebuild reads a rebuild request, which has no fields.
func decodeRebuild(body []byte) error {
	_, err := members("rebuild", body, maxRequestSize)
	return err
}

// check is what the Client and the controller check of an operator request
// (what is verb, as "cancel"): the target's ids and the reason.
func (r OperatorRequest) check(what string) (Target, error) {
	if r.Target == "" {
		return Target{}, badRequest("%s request: target: required: FLOW, FLOW/TASK or an attempt id", what)
	}
	t, err := ParseTarget(r.Target)
	if err != nil {
		return Target{}, badRequest("%s request: target: %v", what, err)
	}
	return t, checkReason(what, r.Reason)
}

func decodeOperator(what string, body []byte) (OperatorRequest, Target, error) {
	var r OperatorRequest
	m, err := members(what, body, maxRequestSize, "target", "reason")
	if err == nil {
		r.Target, err = stringMember(what, m, "target")
	}
	if err == nil {
		r.Reason, err = stringMember(what, m, "reason")
	}
	if err != nil {
		return r, Target{}, err
	}
	t, err := r.check(what)
	return r, t, err
}

// check is what the Client and the controller check of a report request.
func (r ReportRequest) check() error {
	if r.Attempt == "" {
		return badRequest("report request: attempt: required: an attempt id (FLOW_TASK_N)")
	}
	t, err := ParseTarget(r.Attempt)
	switch {
	case err != nil:
		return badRequest("report request: attempt: %v", err)
	case t.Attempt == "":
		return badRequest("report request: attempt: %q is not an attempt id (FLOW_TASK_N)", r.Attempt)
	}
	return nil
}

func decodeReport(body []byte) (ReportRequest, error) {
	var r ReportRequest
	m, err := members("report", body, maxRequestSize, "attempt")
	if err == nil {
		r.Attempt, err = stringMember("report", m, "attempt")
	}
	if err == nil {
		err = r.check()
	}
	return r, err
}

// check is what the Client and the controller check of a resolve request,
// but the spec, which the controller decodes from its wire form.
func (r ResolveRequest) check() error {
	switch {
	case r.Flow == "" && r.Spec == nil:
		return badRequest("resolve request: flow or spec: required: a submitted flow's id or a flow")
	case r.Flow != "" && r.Spec != nil:
		return badRequest("resolve request: flow and spec are both set: resolve one or the other")
	}
	if r.Flow != "" {
		if err := drovertype.ValidID(r.Flow); err != nil {
			return badRequest("resolve request: flow: %v", err)
		}
	}
	if r.Task != "" {
		if err := drovertype.ValidID(r.Task); err != nil {
			return badRequest("resolve request: task: %v", err)
		}
	}
	return nil
}

func decodeResolve(body []byte, opts flow.Options) (ResolveRequest, error) {
	var r ResolveRequest
	m, err := members("resolve", body, maxSpecRequestSize, "flow", "spec", "task")
	if err == nil {
		r.Flow, err = stringMember("resolve", m, "flow")
	}
	if err == nil {
		r.Task, err = stringMember("resolve", m, "task")
	}
	if err != nil {
		return r, err
	}
	if raw, ok := m["spec"]; ok && raw.Kind() != 'n' {
		spec, err := flow.DecodeJSON(raw, opts)
		if err != nil {
			return r, flowRefused(err)
		}
		r.Spec = spec
	}
	return r, r.check()
}

// number returns member name of m, a JSON number, as its text; "" when
// the member is absent.
func number(what string, m map[string]jsontext.Value, name string) (string, error) {
	raw, ok := m[name]
	if !ok {
		return "", nil
	}
	if raw.Kind() != '0' {
		return "", badRequest("%s request: %s: must be a number, got %s", what, name, flow.JSONKindName(raw.Kind()))
	}
	return strings.TrimSpace(string(raw)), nil
}

// wholeMember decodes member name of m, a whole number within 64 bits, in
// the words a flow's budget is refused with (the JSON library's differ
// from one run to the next); nil when the member is absent.
func wholeMember(what string, m map[string]jsontext.Value, name string) (*int64, error) {
	text, err := number(what, m, name)
	if text == "" || err != nil {
		return nil, err
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, badRequest("%s request: %s: must be a whole number within 64 bits, got %.40s", what, name, text)
	}
	return &v, nil
}

// floatMember decodes member name of m, a number within float64's range;
// nil when the member is absent.
func floatMember(what string, m map[string]jsontext.Value, name string) (*float64, error) {
	text, err := number(what, m, name)
	if text == "" || err != nil {
		return nil, err
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, badRequest("%s request: %s: number %.40s is out of range", what, name, text)
	}
	return &v, nil
}

// decodeBudget reads a budget request: the target (FLOW or FLOW/TASK), the
// limits it replaces and the reason.
func decodeBudget(body []byte) (BudgetRequest, Target, error) {
	const what = "budget"
	var r BudgetRequest
	m, err := members(what, body, maxRequestSize, "target", "tokens", "cost_usd", "reason")
	if err != nil {
		return r, Target{}, err
	}
	if r.Target, err = stringMember(what, m, "target"); err != nil {
		return r, Target{}, err
	}
	if r.Reason, err = stringMember(what, m, "reason"); err != nil {
		return r, Target{}, err
	}
	if r.Tokens, err = wholeMember(what, m, "tokens"); err != nil {
		return r, Target{}, err
	}
	if r.CostUSD, err = floatMember(what, m, "cost_usd"); err != nil {
		return r, Target{}, err
	}
	t, err := OperatorRequest{Target: r.Target, Reason: r.Reason}.check(what)
	if err == nil && t.Attempt != "" {
		err = badRequest("budget request: target: takes FLOW or FLOW/TASK, not an attempt")
	}
	if err == nil {
		if lerr := checkBudgetLimits(&r); lerr != nil {
			err = badRequest("budget request: %v", lerr)
		}
	}
	return r, t, err
}
