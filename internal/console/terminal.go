package console

import (
	"strings"
	"unicode/utf8"
)

// termText makes a CLI's output safe to show as text: terminal escape
// sequences (colours, cursor moves, window titles, OSC 8 links) are
// removed, other control characters shown as their control pictures
// (U+2400...), carriage returns made line breaks, invalid UTF-8 and the
// characters that reorder text (bidi controls) replaced with U+FFFD.
// HTML escaping is the templates' or textContent's job on top of this:
// this is about what a terminal would have done with the bytes.
//
// It is a stream filter: a sequence cut between two chunks is held until
// the next, so each attempt's output needs its own termText.
type termText struct {
	carry []byte
}

// maxCarry bounds an escape sequence held between chunks; a longer one is
// dropped whole.
const maxCarry = 4096

// cleanTerminal cleans one complete text.
func cleanTerminal(s string) string {
	if plain(s) {
		return s
	}
	var t termText
	return t.write(s) + t.flush()
}

// write cleans the next chunk of a stream.
func (t *termText) write(chunk string) string {
	var in []byte
	if len(t.carry) > 0 {
		in = append(t.carry, chunk...)
		t.carry = nil
	} else {
		in = []byte(chunk)
	}
	var b strings.Builder
	b.Grow(len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == 0x1b:
			n, complete := escapeLen(in[i:])
			if !complete {
				if len(in)-i <= maxCarry {
					t.carry = append([]byte(nil), in[i:]...)
				}
				return b.String()
			}
			i += n
			continue
		case c == '\r':
			if i+1 < len(in) && in[i+1] == '\n' {
				i++
				continue
			}
			if i+1 == len(in) {
				t.carry = []byte{'\r'} // a CRLF cut in two
				return b.String()
			}
			b.WriteByte('\n')
		case c == '\n' || c == '\t':
			b.WriteByte(c)
		case c < 0x20:
			b.WriteRune(rune(0x2400 + int(c)))
		case c == 0x7f:
			b.WriteRune('\u2421')
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				if !utf8.FullRune(in[i:]) && len(in)-i < utf8.UTFMax {
					t.carry = append([]byte(nil), in[i:]...) // a character cut in two
					return b.String()
				}
				b.WriteRune(utf8.RuneError)
				i++
				continue
			}
			switch {
			case r == 0x9b: // C1 CSI: a whole sequence, like ESC [
				n, complete := csiLen(in[i+size:])
				if !complete {
					if len(in)-i <= maxCarry {
						t.carry = append([]byte(nil), in[i:]...)
					}
					return b.String()
				}
				i += size + n
				continue
			case r >= 0x80 && r < 0xa0, bidiControl(r):
				b.WriteRune(utf8.RuneError)
			default:
				b.WriteString(string(in[i : i+size]))
			}
			i += size
			continue
		}
		i++
	}
	return b.String()
}

// plain reports whether s is printable ASCII, tabs and newlines: nothing
// to clean.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

// flush ends the stream: what was held is shown as cleaned text.
func (t *termText) flush() string {
	if len(t.carry) == 0 {
		return ""
	}
	rest := t.carry
	t.carry = nil
	if rest[0] == 0x1b || (len(rest) > 1 && rest[0] == 0xc2 && rest[1] == 0x9b) {
		return "" // an unfinished escape sequence: nothing a terminal shows
	}
	if rest[0] == '\r' {
		return "\n"
	}
	return strings.ToValidUTF8(string(rest), "\uFFFD")
}

// escapeLen returns the length of the escape sequence at the start of b
// (b[0] is ESC), and whether it is complete.
func escapeLen(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		n, ok := csiLen(b[2:])
		return 2 + n, ok
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: up to BEL or ST
		for i := 2; i < len(b); i++ {
			if b[i] == 0x07 {
				return i + 1, true
			}
			if b[i] == 0x1b && i+1 < len(b) {
				if b[i+1] == '\\' {
					return i + 2, true
				}
			} else if b[i] == 0x1b {
				return 0, false
			}
		}
		return 0, false
	case '(', ')', '*', '+', '-', '.', '/', '#', '%', ' ': // a charset or similar: one more byte
		if len(b) < 3 {
			return 0, false
		}
		return 3, true
	default: // a two-byte sequence (ESC 7, ESC c, ...)
		return 2, true
	}
}

// csiLen returns the length of a CSI sequence's body (after ESC [ or
// U+009B): bytes 0x20-0x3f, then a final byte 0x40-0x7e. A byte outside
// those ends it too (a broken sequence is dropped up to there).
func csiLen(b []byte) (int, bool) {
	for i, c := range b {
		if c >= 0x40 && c <= 0x7e {
			return i + 1, true
		}
		if c < 0x20 || c > 0x3f {
			return i, true
		}
	}
	return 0, false
}

// bidiControl reports whether r changes the direction of the text around
// it, which can make shown text read otherwise than it is.
func bidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
