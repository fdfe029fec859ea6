package flow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	yaml "go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("90s", "10m")
// in YAML and JSON, so flow files and events stay readable. Negative
// durations are invalid.
type Duration time.Duration

// String returns the Go duration string, e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalJSONTo is MarshalJSON for the JSON v2 implementation, which the
// projection encodes its records with: the same string, written straight
// to the encoder instead of encoded by encoding/json and then checked and
// copied (a task's record has four durations in its plan).
func (d Duration) MarshalJSONTo(enc *jsontext.Encoder) error {
	return enc.WriteToken(jsontext.String(d.String()))
}

// UnmarshalJSON reads a duration string; null leaves d unchanged, as
// encoding/json does for built-in types.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("flow: duration must be a string like \"90s\": %w", err)
	}
	v, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("flow: %w", err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string. Parse does not use it (it walks the
// node tree itself to report positions); it serves code that embeds a
// Duration in its own YAML, such as configuration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("flow: line %d: duration must be a string like \"90s\": %w", n.Line, ErrInvalid)
	}
	if n.ShortTag() == "!!null" {
		return nil
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("flow: line %d: %w: %w", n.Line, err, ErrInvalid)
	}
	*d = v
	return nil
}

// parseDuration is the one place the duration syntax is defined. Its errors
// are bare messages; callers add the prefix and position.
func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a Go duration like \"90s\" or \"10m\"", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return Duration(v), nil
}
