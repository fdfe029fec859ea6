package projection_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
	"github.com/drover-dev/drover/internal/flow"
)

// TestRecordEncodingIsEncodingJSONs: records are encoded with the JSON v2
// encoder in its v1 mode, for speed; the bytes must be exactly what
// encoding/json writes, or a store written by an older build would differ
// from its rebuild. The standard scenario covers every record kind, with
// prompts, plans, reports and poison; the extra attempt has the characters
// encoding/json escapes specially. (Invalid UTF-8, which the two write
// differently, cannot reach the state: the decoder refuses it.)
func TestRecordEncodingIsEncodingJSONs(t *testing.T) {
	st := projection.NewState()
	stream := foldtest.StandardScenario(t, true).CleanStream()
	for _, seq := range slices.Sorted(maps.Keys(stream)) {
		st.ApplyRaw(seq, foldtest.Subject(stream[seq]), stream[seq])
	}
	st.Attempts["x_y_1"] = &projection.Attempt{ID: "x_y_1", Prompt: "<script>&amp; \u2028 \u2029 \ufffd é", Args: []string{}, Report: &event.Report{StdoutTail: "\x00\x1f\"\\"}}
	var keys []string
	for id := range st.Flows {
		keys = append(keys, projection.KeyFlow+id, projection.KeyFlowDef+id)
	}
	for id := range st.Tasks {
		keys = append(keys, projection.KeyTask+id)
	}
	for id := range st.Attempts {
		keys = append(keys, projection.KeyAttempt+id)
	}
	n := 0
	for _, k := range keys {
		got, err := st.EncodeRecord(k)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch {
		case strings.HasPrefix(k, projection.KeyFlow):
			// The flow without its definition, which is a record of its own.
			f := *st.Flows[k[len(projection.KeyFlow):]]
			f.Order, f.Spec = nil, flow.Spec{}
			v = f
		case strings.HasPrefix(k, projection.KeyFlowDef):
			f := st.Flows[k[len(projection.KeyFlowDef):]]
			v = struct {
				ID    string    `json:"id"`
				Order []string  `json:"order"`
				Spec  flow.Spec `json:"spec"`
			}{f.ID, f.Order, f.Spec}
		case strings.HasPrefix(k, projection.KeyTask):
			v = st.Tasks[k[len(projection.KeyTask):]]
		case strings.HasPrefix(k, projection.KeyAttempt):
			v = st.Attempts[k[len(projection.KeyAttempt):]]
		default:
			continue
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s encodes as\n%s\nencoding/json writes\n%s", k, got, want)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("compared %d records", n)
	}
}
