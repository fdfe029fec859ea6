package event

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestDecodeErrorsAreWordedAlike: the JSON v2 module words its errors
// "cannot" or "unable to" at random per process, and a poison reason is a
// stored record that a rebuild in another process must reproduce.
func TestDecodeErrorsAreWordedAlike(t *testing.T) {
	var v struct{ Passed bool }
	err := unmarshal([]byte(`{"Passed":"yes"}`), &v)
	if err == nil || !strings.HasPrefix(err.Error(), "json: cannot unmarshal JSON string into Go bool") {
		t.Fatalf("unmarshal: %v", err)
	}
	inner := errors.New("json: unable to unmarshal JSON array into Go event.Event")
	if got, want := (stableError{inner}).Error(), "json: cannot unmarshal JSON array into Go event.Event"; got != want {
		t.Fatalf("stableError = %q, want %q", got, want)
	}
	if !errors.Is(stableError{inner}, inner) {
		t.Fatal("stableError does not unwrap")
	}
}

// Usage on the wire: a count the CLI did not report is absent, and reads
// back as unknown; an old event, which always carried input_tokens and
// output_tokens, still decodes, its counts known (0 included).
func TestUsageWire(t *testing.T) {
	in, out := int64(38432), int64(0)
	for _, tc := range []struct {
		u    Usage
		want string
	}{
		{Usage{Model: "mock-model"}, `{"model":"mock-model"}`},
		{Usage{InputTokens: &in, OutputTokens: &out}, `{"input_tokens":38432,"output_tokens":0}`},
	} {
		b, err := json.Marshal(tc.u)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.u, b, err, tc.want)
		}
		var back Usage
		if err := unmarshal(b, &back); err != nil || (back.InputTokens == nil) != (tc.u.InputTokens == nil) || back.Known() != tc.u.Known() {
			t.Errorf("%s read back as %+v, %v", b, back, err)
		}
	}
	var old Report
	if err := unmarshal([]byte(`{"success":true,"exit_code":0,"duration_ms":1,"usage":{"model":"m","input_tokens":0,"output_tokens":0}}`), &old); err != nil {
		t.Fatal(err)
	}
	if u := old.Usage; u == nil || u.InputTokens == nil || *u.InputTokens != 0 || u.CacheReadTokens != nil || u.CostUSD != nil || !u.Known() {
		t.Errorf("old usage %+v", old.Usage)
	}
	if (&Usage{Model: "m"}).Known() || (*Usage)(nil).Known() {
		t.Error("a usage of no counts is known")
	}
}
