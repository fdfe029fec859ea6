package event

import (
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
