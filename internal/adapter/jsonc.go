package adapter

import (
	"errors"
	"unicode/utf8"
)

// errJSONC is a JSONC text whose comment never ends.
var errJSONC = errors.New("adapter: unterminated comment in JSONC")

// stripJSONC turns JSONC — JSON with // and /* */ comments and trailing
// commas, as opencode and kilo read their configuration (jsonc-parser) —
// into JSON for encoding/json: comments become spaces, a comma followed
// only by blanks and comments before '}' or ']' is dropped, and strings
// are copied as they are. Anything else that is not JSON stays, for
// encoding/json to refuse.
func stripJSONC(in []byte) ([]byte, error) {
	out := make([]byte, 0, len(in))
	comma := -1   // index in out of a comma after a value, that may turn out to trail
	var last byte // the last byte put in out that is not a blank
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			j := stringEnd(in, i)
			out = append(out, in[i:j]...)
			i, comma, last = j-1, -1, '"'
			continue
		case c == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				i++
			}
			out = append(out, '\n')
			continue
		case c == '/' && i+1 < len(in) && in[i+1] == '*':
			end := -1
			for j := i + 2; j+1 < len(in); j++ {
				if in[j] == '*' && in[j+1] == '/' {
					end = j + 2
					break
				}
			}
			if end < 0 {
				return nil, errJSONC
			}
			out, i = append(out, ' '), end-1
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			out = append(out, c)
			continue
		case c == ',':
			// Only a comma after a value can trail: "[,]" stays invalid.
			comma = -1
			if last != 0 && last != '[' && last != '{' && last != ',' && last != ':' {
				comma = len(out)
			}
		case (c == '}' || c == ']') && comma >= 0:
			out[comma] = ' '
			comma = -1
		default:
			comma = -1
		}
		out, last = append(out, c), c
	}
	if !utf8.Valid(out) {
		return nil, errors.New("adapter: JSONC is not valid UTF-8")
	}
	return out, nil
}

// stringEnd returns the index after the JSON string starting at in[i]
// (a '"'), or len(in) if it never ends.
func stringEnd(in []byte, i int) int {
	for j := i + 1; j < len(in); j++ {
		switch in[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(in)
}
