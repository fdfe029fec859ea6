package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// args are a tool call's arguments, by name. Reading them is lenient where
// models are sloppy — unknown keys are ignored, numbers and booleans may
// come as strings, null or empty input is {} — and strict where it matters:
// the input must be one JSON object, and a value of the wrong type is an
// error that names the argument.
type args map[string]json.RawMessage

func parseArgs(input json.RawMessage) (args, error) {
	in := bytes.TrimSpace(input)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return args{}, nil
	}
	if in[0] != '{' {
		return nil, fmt.Errorf("the arguments must be a JSON object, got %s", describe(in))
	}
	var a args
	dec := json.NewDecoder(bytes.NewReader(in))
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON (%v); send one JSON object", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("the arguments must be a single JSON object, with nothing after it")
	}
	return a, nil
}

func describe(b []byte) string {
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return strconv.Quote(clip(string(b)))
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || bytes.Equal(v, []byte("null"))
}

// str returns a string argument; a missing one is "" unless required.
func (a args) str(name string, required bool) (string, error) {
	v, ok := a[name]
	if !ok || isNull(v) {
		if required {
			return "", fmt.Errorf("argument %q is required", name)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("argument %q must be a string, got %s", name, describe(bytes.TrimSpace(v)))
	}
	return s, nil
}

// int returns an integer argument, which may also come as "10" or 10.0,
// and whether it was given.
func (a args) int(name string) (int64, bool, error) {
	v, ok := a[name]
	if !ok || isNull(v) {
		return 0, false, nil
	}
	s := strings.TrimSpace(string(v))
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true, nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return int64(x), true, nil
	}
	return 0, false, fmt.Errorf("argument %q must be an integer, got %s", name, strconv.Quote(clip(string(v))))
}

// bool returns a boolean argument, which may also come as "true".
func (a args) bool(name string) (bool, error) {
	v, ok := a[name]
	if !ok || isNull(v) {
		return false, nil
	}
	s := strings.TrimSpace(string(v))
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("argument %q must be true or false, got %s", name, strconv.Quote(clip(string(v))))
	}
	return b, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}
