package flow

import (
	"errors"
	"fmt"
)

// MaxIDLen is the longest flow or task id. 63 keeps an id usable as a DNS
// label, a Kubernetes name and one component of a branch name.
const MaxIDLen = 63

// ValidID reports whether s can be a flow or task id, returning a
// descriptive error or nil. Ids become NATS subject tokens, git branch name
// components and file names, so they are limited to
// ^[A-Za-z0-9][A-Za-z0-9-]{0,62}$: no dots (subject separators, ".."), no
// slashes (paths, refs), no spaces, underscores or non-ASCII letters, and no
// leading dash (it would read as a command-line flag).
func ValidID(s string) error {
	if msg := idProblem(s); msg != "" {
		return errors.New("flow: invalid id: " + msg)
	}
	return nil
}

// idProblem describes what is wrong with s as an id, or returns "".
func idProblem(s string) string {
	if s == "" {
		return "id is empty"
	}
	if len(s) > MaxIDLen {
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", s, len(s), MaxIDLen)
	}
	if s[0] == '-' {
		return fmt.Sprintf("%q starts with '-'; an id must start with a letter or digit", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			continue
		}
		return fmt.Sprintf("%q contains %s; only ASCII letters, digits and '-' are allowed", s, describeByte(c))
	}
	return ""
}

// describeByte names an offending character for an error message.
func describeByte(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c >= 0x80:
		return "a non-ASCII character"
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf("control character %#02x", c)
	default:
		return fmt.Sprintf("'%c'", c)
	}
}
