package flow

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// TestDurationJSONv2: a Duration encodes to the same bytes by the JSON v2
// implementation (MarshalJSONTo), as the projection's records are encoded,
// as by encoding/json (MarshalJSON), alone, by pointer, in a slice and in
// a map, so that a record written before MarshalJSONTo is written again
// byte for byte.
func TestDurationJSONv2(t *testing.T) {
	type holder struct {
		D   Duration            `json:"d"`
		P   *Duration           `json:"p,omitempty"`
		Nil *Duration           `json:"nil"`
		S   []Duration          `json:"s"`
		M   map[string]Duration `json:"m"`
		O   Duration            `json:"o,omitempty"`
	}
	for _, d := range []time.Duration{0, 1, time.Microsecond + 1, 90 * time.Second, 2*time.Hour + 3*time.Millisecond, math.MaxInt64} {
		v := Duration(d)
		h := holder{D: v, P: &v, S: []Duration{v, 0}, M: map[string]Duration{"b": v, "a": 1}, O: v}
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonv2.Marshal(h, jsonv1.DefaultOptionsV1())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%v: JSON v2 wrote %s, encoding/json %s", d, got, want)
		}
	}
}
